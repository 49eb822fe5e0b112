// Package command holds the terrace commands: component push and get, chart
// push.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/terrace-dev/terrace/kit/ocm"
)

// globals are the flags every command shares.
type globals struct {
	registryConfig string
	plainHTTP      bool
	limits         ocm.Limits
}

// Execute runs the terrace command line; it returns the exit code.
func Execute(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root := newRoot(stdout)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		_, _ = fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	return 0
}

func newRoot(stdout io.Writer) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "terrace",
		Short:         "Build and push OCM component versions and Helm charts to OCI registries",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	fs := root.PersistentFlags()
	fs.StringVar(&g.registryConfig, "registry-config", "",
		"Docker config file with registry credentials (default ~/.docker/config.json when it exists).")
	fs.BoolVar(&g.plainHTTP, "plain-http", false,
		"Speak plain HTTP to the registry; allowed for loopback registries (localhost, 127.0.0.0/8, ::1) only.")
	g.limits.BindFlags(fs)

	component := &cobra.Command{Use: "component", Short: "Push and read OCM component versions"}
	component.AddCommand(newComponentPush(g, stdout), newComponentGet(g, stdout))
	chartCmd := &cobra.Command{Use: "chart", Short: "Push Helm charts to OCI registries"}
	chartCmd.AddCommand(newChartPush(g, stdout))
	root.AddCommand(component, chartCmd)
	return root
}

// credentials loads the docker config: the file given, or the default when
// it exists.
func (g *globals) credentials() (*ocm.DockerConfig, error) {
	path := g.registryConfig
	if path == "" {
		dir := os.Getenv("DOCKER_CONFIG")
		if dir == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, nil //nolint:nilnil // no home: anonymous
			}
			dir = filepath.Join(home, ".docker")
		}
		path = filepath.Join(dir, "config.json")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, nil //nolint:nilnil // no default config: anonymous
		}
	}
	return ocm.LoadDockerConfig(path)
}

// repository opens the OCM repository at baseURL with the shared flags.
func (g *globals) repository(baseURL string) (*ocm.Repository, error) {
	base, schemePlain, err := ocm.ParseBaseURL(baseURL, "")
	if err != nil {
		return nil, err
	}
	repo := &ocm.Repository{Base: base, Limits: g.limits}
	if err := g.transport(repo, schemePlain); err != nil {
		return nil, err
	}
	return repo, nil
}

// transport sets plain HTTP (loopback only) and credentials on repo.
func (g *globals) transport(repo *ocm.Repository, schemePlain bool) error {
	host := repo.Host()
	if g.plainHTTP || schemePlain {
		if !ocm.IsLoopbackHost(host) {
			return fmt.Errorf("plain HTTP (--plain-http or an http:// URL) is allowed for loopback registries only (localhost, 127.0.0.0/8, ::1); %s is not one", host)
		}
		repo.PlainHTTP = true
	}
	repo.PlainHTTPFor = func(other string) bool { return repo.PlainHTTP && ocm.IsLoopbackHost(other) }
	creds, err := g.credentials()
	if err != nil {
		return err
	}
	if creds != nil {
		repo.Credentials = creds.CredentialFunc()
	}
	return nil
}
