package command

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"oras.land/oras-go/v2/registry"

	"github.com/terrace-dev/terrace/cli/internal/chart"
	"github.com/terrace-dev/terrace/kit/ocm"
)

func newChartPush(g *globals, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "push <chart directory | chart .tgz> <oci reference>",
		Short: "Package a chart (when a directory) and push it to an OCI registry as Helm does",
		Long: `Push packages a chart directory as helm package does (or takes a .tgz) and pushes it with the media types
of helm push: config application/vnd.cncf.helm.config.v1+json, one layer
application/vnd.cncf.helm.chart.content.v1.tar+gzip. The reference names the repository itself
(host/path, an oci:// prefix is accepted); the tag is the chart's version unless the reference has one.`,
		Example: `  terrace chart push ./charts/echo ghcr.io/acme/charts/echo
  terrace chart push echo-1.0.0.tgz 127.0.0.1:5000/charts/echo --plain-http`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := chart.Load(args[0])
			if err != nil {
				return err
			}
			ref, err := registry.ParseReference(strings.TrimPrefix(args[1], "oci://"))
			if err != nil {
				return fmt.Errorf("%q is not an OCI reference (host/path[:tag]): %w", args[1], err)
			}
			if ref.Reference != "" && strings.Contains(ref.Reference, ":") {
				return fmt.Errorf("%q names a digest: give a repository, with a tag or without", args[1])
			}
			tag := ref.Reference
			if tag == "" {
				// OCI tags have no "+": Helm writes build metadata with "_".
				tag = strings.ReplaceAll(c.Version, "+", "_")
			}
			repo := &ocm.Repository{Base: ref.Registry + "/" + ref.Repository, Limits: g.limits}
			if err := g.transport(repo, false); err != nil {
				return err
			}
			r, err := repo.OCIRepository(repo.Base)
			if err != nil {
				return err
			}
			desc, err := chart.Push(cmd.Context(), r, c, tag)
			if err != nil {
				return &ocm.RegistryError{Registry: repo.Host(), Op: fmt.Sprintf("pushing chart %s %s", c.Name, c.Version), Err: err}
			}
			_, _ = fmt.Fprintf(stdout, "pushed chart %s %s to %s:%s (%s)\n", c.Name, c.Version, repo.Base, tag, desc.Digest)
			return nil
		},
	}
}
