package command

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/terrace-dev/terrace/cli/internal/constructor"
	"github.com/terrace-dev/terrace/kit/ocm"
)

func newComponentPush(g *globals, stdout io.Writer) *cobra.Command {
	var repoURL string
	cmd := &cobra.Command{
		Use:   "push --repo <baseUrl> <component-constructor.yaml | component archive directory>",
		Short: "Build component versions from a constructor file or a component archive and push them",
		Long: `Push builds the component versions a component constructor file describes (components: with
resources whose input is dir, file or helm, or whose access is ociArtifact; sources; componentReferences;
labels), or reads a component archive directory (component-descriptor.yaml and blobs/), and pushes each to
the OCM repository --repo, in the OCM OCI layout: <baseUrl>/component-descriptors/<name>:<version>.`,
		Example: `  terrace component push --repo ghcr.io/acme/ocm component-constructor.yaml
  terrace component push --repo 127.0.0.1:5000/ocm --plain-http ./my-component-archive`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if repoURL == "" {
				return fmt.Errorf("--repo is required: the OCM repository's baseUrl, e.g. ghcr.io/acme/ocm")
			}
			built, err := load(args[0])
			if err != nil {
				return err
			}
			repo, err := g.repository(repoURL)
			if err != nil {
				return err
			}
			for _, b := range built {
				desc, err := ocm.Push(cmd.Context(), repo, b.Descriptor, b.Blobs)
				if err != nil {
					return err
				}
				_, _ = fmt.Fprintf(stdout, "pushed %s to %s (%s)\n", b.Descriptor.Key(), repo.Base, desc.Digest)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&repoURL, "repo", "", "The OCM repository (OCI registry host and path prefix) to push to, e.g. ghcr.io/acme/ocm.")
	return cmd
}

// load reads a constructor file or a component archive directory.
func load(path string) ([]constructor.Built, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		if !constructor.IsArchive(path) {
			return nil, fmt.Errorf("%s is a directory without %s: not a component archive", path, constructor.ArchiveDescriptorFile)
		}
		b, err := constructor.LoadArchive(path)
		if err != nil {
			return nil, err
		}
		return []constructor.Built{b}, nil
	}
	return constructor.Load(path)
}

func newComponentGet(g *globals, stdout io.Writer) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "get <baseUrl>//<component name>:<version>",
		Short:   "Print the component descriptor of a component version",
		Example: `  terrace component get ghcr.io/acme/ocm//github.com/acme.org/app:1.0.0`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			baseURL, name, version, err := parseComponentRef(args[0])
			if err != nil {
				return err
			}
			repo, err := g.repository(baseURL)
			if err != nil {
				return err
			}
			cd, err := ocm.Resolve(cmd.Context(), repo, name, version)
			if err != nil {
				return err
			}
			var out []byte
			switch output {
			case "yaml":
				out, err = ocm.EncodeV2(cd)
			case "json":
				out, err = ocm.EncodeV2JSON(cd)
				out = append(out, '\n')
			default:
				return fmt.Errorf("--output %q: yaml or json", output)
			}
			if err != nil {
				return err
			}
			_, err = stdout.Write(out)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "Output format: yaml or json (schema v2).")
	return cmd
}

// parseComponentRef splits <baseUrl>//<name>:<version>; the baseUrl may
// carry a scheme.
func parseComponentRef(ref string) (baseURL, name, version string, err error) {
	scheme := ""
	rest := ref
	if i := strings.Index(ref, "://"); i >= 0 {
		scheme, rest = ref[:i+3], ref[i+3:]
	}
	base, component, ok := strings.Cut(rest, "//")
	if !ok || base == "" || component == "" {
		return "", "", "", fmt.Errorf("%q is not <baseUrl>//<component name>:<version>", ref)
	}
	i := strings.LastIndex(component, ":")
	if i <= 0 || i == len(component)-1 {
		return "", "", "", fmt.Errorf("%q names no version: <baseUrl>//<component name>:<version>", ref)
	}
	return scheme + base, component[:i], component[i+1:], nil
}
