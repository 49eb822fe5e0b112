// Package ocicheck pushes an OCI artifact shaped as `helm push` shapes a
// chart, and a container image, to a registry with a standard OCI client,
// oras-go (the library Helm's own registry client is built on), and pulls
// them back by digest, checking that the registry returns exactly what was
// pushed. Tests run it against registrytest's in-process registry; the local
// environment's smoke test runs it against the registry `make up` starts
// (cmd/oci-roundtrip).
package ocicheck

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
)

// The media types `helm push` gives a chart.
const (
	ChartConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	ChartLayerMediaType  = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// Pushed names what a push wrote: the repository (host:port/path), the tag
// and the manifest's digest.
type Pushed struct {
	Repository string
	Tag        string
	Digest     digest.Digest
}

// String is the reference by tag and digest, <repository>:<tag>@<digest>.
func (p Pushed) String() string { return p.Repository + ":" + p.Tag + "@" + p.Digest.String() }

// repository opens repo (host:port/path) over plain HTTP without credentials.
func repository(repo string) (*remote.Repository, error) {
	r, err := remote.NewRepository(repo)
	if err != nil {
		return nil, err
	}
	r.PlainHTTP = true
	return r, nil
}

// PushChart pushes chart, the bytes of a chart archive, with chartConfig (the
// chart's metadata as JSON) to repo (host:port/path) under tag, with the
// media types of a Helm chart.
func PushChart(ctx context.Context, repo, tag string, chartConfig, chart []byte) (Pushed, error) {
	r, err := repository(repo)
	if err != nil {
		return Pushed{}, err
	}
	config, err := oras.PushBytes(ctx, r, ChartConfigMediaType, chartConfig)
	if err != nil {
		return Pushed{}, fmt.Errorf("pushing the chart's config to %s: %w", repo, err)
	}
	layer, err := oras.PushBytes(ctx, r, ChartLayerMediaType, chart)
	if err != nil {
		return Pushed{}, fmt.Errorf("pushing the chart to %s: %w", repo, err)
	}
	return pushManifest(ctx, r, tag, config, []ocispec.Descriptor{layer})
}

// pushManifest pushes an image manifest of config and layers, already in the
// repository, and tags it.
func pushManifest(ctx context.Context, r *remote.Repository, tag string, config ocispec.Descriptor, layers []ocispec.Descriptor) (Pushed, error) {
	manifest, err := oras.PackManifest(ctx, r, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		ConfigDescriptor: &config,
		Layers:           layers,
	})
	if err != nil {
		return Pushed{}, fmt.Errorf("pushing the manifest to %s: %w", r.Reference, err)
	}
	if err := r.Tag(ctx, manifest, tag); err != nil {
		return Pushed{}, fmt.Errorf("tagging %s in %s: %w", manifest.Digest, r.Reference, err)
	}
	return Pushed{Repository: r.Reference.String(), Tag: tag, Digest: manifest.Digest}, nil
}

// PullChart pulls the chart pushed as p by the manifest's digest, checks that
// the manifest and both blobs match their digests and are a chart's, and
// returns the chart's bytes.
func PullChart(ctx context.Context, p Pushed) ([]byte, error) {
	r, manifest, err := pullManifest(ctx, p)
	if err != nil {
		return nil, err
	}
	if manifest.Config.MediaType != ChartConfigMediaType || len(manifest.Layers) != 1 ||
		manifest.Layers[0].MediaType != ChartLayerMediaType {
		return nil, fmt.Errorf("%s is not a chart: config %s, %d layers", p, manifest.Config.MediaType, len(manifest.Layers))
	}
	if _, err := content.FetchAll(ctx, r, manifest.Config); err != nil {
		return nil, fmt.Errorf("pulling the config of %s: %w", p, err)
	}
	chart, err := content.FetchAll(ctx, r, manifest.Layers[0])
	if err != nil {
		return nil, fmt.Errorf("pulling the chart of %s: %w", p, err)
	}
	return chart, nil
}

// pullManifest fetches p's manifest by its digest; content.ReadAll checks
// the bytes against the digest and size the registry names.
func pullManifest(ctx context.Context, p Pushed) (*remote.Repository, ocispec.Manifest, error) {
	r, err := repository(p.Repository)
	if err != nil {
		return nil, ocispec.Manifest{}, err
	}
	desc, rc, err := r.FetchReference(ctx, p.Digest.String())
	if err != nil {
		return nil, ocispec.Manifest{}, fmt.Errorf("pulling %s: %w", p, err)
	}
	defer func() { _ = rc.Close() }()
	raw, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, ocispec.Manifest{}, fmt.Errorf("pulling %s: %w", p, err)
	}
	if desc.Digest != p.Digest || digest.FromBytes(raw) != p.Digest {
		return nil, ocispec.Manifest{}, fmt.Errorf("pulling %s returned the manifest %s", p, digest.FromBytes(raw))
	}
	var manifest ocispec.Manifest
	if err := json.Unmarshal(raw, &manifest); err != nil {
		return nil, ocispec.Manifest{}, fmt.Errorf("manifest of %s: %w", p, err)
	}
	return r, manifest, nil
}

// ResolveTag returns the digest the registry holds under p's tag.
func ResolveTag(ctx context.Context, p Pushed) (digest.Digest, error) {
	r, err := repository(p.Repository)
	if err != nil {
		return "", err
	}
	desc, err := r.Resolve(ctx, p.Tag)
	if err != nil {
		return "", fmt.Errorf("resolving %s:%s: %w", p.Repository, p.Tag, err)
	}
	return desc.Digest, nil
}
