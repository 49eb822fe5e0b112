package ocm

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
)

// Media types of the OCI mapping.
const (
	MediaTypeComponentConfig         = "application/vnd.ocm.software.component.config.v1+json"
	MediaTypeComponentDescriptorTar  = "application/vnd.ocm.software.component-descriptor.v2+yaml+tar"
	MediaTypeComponentDescriptorYAML = "application/vnd.ocm.software.component-descriptor.v2+yaml"
	MediaTypeComponentDescriptorJSON = "application/vnd.ocm.software.component-descriptor.v2+json"

	// The media types of component versions written before OCM, by the
	// Gardener component-cli; read, never written.
	mediaTypeLegacyComponentConfig  = "application/vnd.gardener.cloud.cnudie.component.config.v1+json"
	legacyDescriptorMediaTypePrefix = "application/vnd.gardener.cloud.cnudie.component-descriptor.v2"

	// annotationDescriptorManifest marks the descriptor manifest in an
	// index-based component version.
	annotationDescriptorManifest = "software.ocm.descriptor"
	// AnnotationComponentVersion names a component version manifest.
	AnnotationComponentVersion = "software.ocm.componentversion"
)

// ComponentConfig is the config blob of a component version manifest.
type ComponentConfig struct {
	ComponentDescriptorLayer *ocispec.Descriptor `json:"componentDescriptorLayer"`
}

// Version is a component version as read from a registry.
type Version struct {
	Descriptor *ComponentDescriptor
	// Digest is the digest of the manifest the tag pointed to: the key of
	// this exact content.
	Digest digest.Digest
	// Layers are the manifest's layers: the descriptor and the local blobs.
	Layers []ocispec.Descriptor
}

// Resolve reads the descriptor of component name in version from repo.
func Resolve(ctx context.Context, repo *Repository, name, version string) (*ComponentDescriptor, error) {
	v, err := ResolveVersion(ctx, repo, name, version)
	if err != nil {
		return nil, err
	}
	return v.Descriptor, nil
}

// ResolveDigest returns the manifest digest of a component version without
// reading it: what a cache keys by.
func ResolveDigest(ctx context.Context, repo *Repository, name, version string) (digest.Digest, error) {
	r, err := repo.OCIRepository(repo.componentRepository(name))
	if err != nil {
		return "", err
	}
	desc, err := r.Resolve(ctx, VersionToTag(version))
	if err != nil {
		return "", repo.versionError(name, version, err)
	}
	return desc.Digest, nil
}

// ResolveVersion reads a component version: its manifest, config and
// descriptor layer. The descriptor must name the component version asked
// for.
func ResolveVersion(ctx context.Context, repo *Repository, name, version string) (*Version, error) {
	if name == "" || version == "" {
		return nil, fmt.Errorf("a component version needs a component name and a version (got %q:%q)", name, version)
	}
	r, err := repo.OCIRepository(repo.componentRepository(name))
	if err != nil {
		return nil, err
	}
	manifestDesc, manifest, err := repo.fetchComponentManifest(ctx, r, name, version)
	if err != nil {
		return nil, err
	}
	layer, err := repo.descriptorLayer(ctx, r, manifest)
	if err != nil {
		return nil, fmt.Errorf("component %s:%s in %s: %w", name, version, repo.Base, err)
	}
	data, err := repo.fetchBounded(ctx, r, layer, "the component descriptor layer")
	if err != nil {
		return nil, fmt.Errorf("component %s:%s in %s: %w", name, version, repo.Base, err)
	}
	cd, err := decodeDescriptorLayer(layer.MediaType, data, repo.Limits.withDefaults().MaxDescriptorBytes)
	if err != nil {
		return nil, fmt.Errorf("component %s:%s in %s: %w", name, version, repo.Base, err)
	}
	if cd.Component.Name != name || cd.Component.Version != version {
		return nil, fmt.Errorf("component %s:%s in %s: the descriptor stored there is of %s", name, version, repo.Base, cd.Key())
	}
	return &Version{Descriptor: cd, Digest: manifestDesc.Digest, Layers: manifest.Layers}, nil
}

// fetchComponentManifest resolves the version's tag to an image manifest;
// an index is followed to its descriptor manifest.
func (repo *Repository) fetchComponentManifest(ctx context.Context, r *remote.Repository, name, version string) (ocispec.Descriptor, *ocispec.Manifest, error) {
	desc, rc, err := r.FetchReference(ctx, VersionToTag(version))
	if err != nil {
		return desc, nil, repo.versionError(name, version, err)
	}
	data, err := readAllBounded(rc, desc, repo.Limits.withDefaults().MaxDescriptorBytes, "the component version's manifest", "ocm-max-descriptor-bytes")
	if err != nil {
		return desc, nil, repo.registryError(fmt.Sprintf("reading component %s:%s", name, version), err)
	}
	if desc.MediaType == ocispec.MediaTypeImageIndex {
		inner, err := descriptorManifestOf(data)
		if err != nil {
			return desc, nil, fmt.Errorf("component %s:%s in %s: %w", name, version, repo.Base, err)
		}
		data, err = repo.fetchBounded(ctx, r, inner, "the component version's descriptor manifest")
		if err != nil {
			return desc, nil, fmt.Errorf("component %s:%s in %s: %w", name, version, repo.Base, err)
		}
	}
	var manifest ocispec.Manifest
	if err := json.Unmarshal(data, &manifest); err != nil {
		return desc, nil, fmt.Errorf("component %s:%s in %s: the manifest is not JSON: %w", name, version, repo.Base, err)
	}
	return desc, &manifest, nil
}

// descriptorManifestOf picks the descriptor manifest of an index: the one
// annotated as such, or the first.
func descriptorManifestOf(indexData []byte) (ocispec.Descriptor, error) {
	var index ocispec.Index
	if err := json.Unmarshal(indexData, &index); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("the index is not JSON: %w", err)
	}
	var marked []ocispec.Descriptor
	for _, m := range index.Manifests {
		if m.Annotations[annotationDescriptorManifest] == "true" {
			marked = append(marked, m)
		}
	}
	switch {
	case len(marked) == 1:
		return marked[0], nil
	case len(marked) > 1:
		return ocispec.Descriptor{}, fmt.Errorf("the index marks %d manifests as the component descriptor", len(marked))
	case len(index.Manifests) == 0:
		return ocispec.Descriptor{}, fmt.Errorf("the index has no manifests")
	}
	return index.Manifests[0], nil
}

// descriptorLayer finds the descriptor layer through the component config,
// or layer 0 when the config does not name one.
func (repo *Repository) descriptorLayer(ctx context.Context, r *remote.Repository, manifest *ocispec.Manifest) (ocispec.Descriptor, error) {
	switch manifest.Config.MediaType {
	case MediaTypeComponentConfig, mediaTypeLegacyComponentConfig:
	default:
		return ocispec.Descriptor{}, fmt.Errorf("the manifest's config has media type %q, not %s: not a component version", manifest.Config.MediaType, MediaTypeComponentConfig)
	}
	data, err := repo.fetchBounded(ctx, r, manifest.Config, "the component config")
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	var cfg ComponentConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("the component config is not JSON: %w", err)
	}
	if cfg.ComponentDescriptorLayer != nil && cfg.ComponentDescriptorLayer.Digest != "" {
		return *cfg.ComponentDescriptorLayer, nil
	}
	if len(manifest.Layers) == 0 {
		return ocispec.Descriptor{}, fmt.Errorf("the manifest has no layers and its config names no componentDescriptorLayer")
	}
	return manifest.Layers[0], nil
}

// decodeDescriptorLayer reads the descriptor from its layer: a tar holding
// component-descriptor.yaml, or the plain YAML or JSON.
func decodeDescriptorLayer(mediaType string, data []byte, limit int64) (*ComponentDescriptor, error) {
	isTar := strings.HasSuffix(mediaType, "+tar") || mediaType == ocispec.MediaTypeImageLayer || mediaType == "application/x-tar"
	isPlain := strings.HasSuffix(mediaType, "+yaml") || strings.HasSuffix(mediaType, "+json")
	switch {
	case isTar:
		raw, err := descriptorFromTar(data, limit)
		if err != nil {
			return nil, err
		}
		data = raw
	case isPlain && (strings.HasPrefix(mediaType, "application/vnd.ocm.software.component-descriptor.") || strings.HasPrefix(mediaType, legacyDescriptorMediaTypePrefix)):
	default:
		return nil, fmt.Errorf("the descriptor layer has media type %q, not %s (or its +yaml/+json forms)", mediaType, MediaTypeComponentDescriptorTar)
	}
	return Decode(data)
}

func descriptorFromTar(data []byte, limit int64) ([]byte, error) {
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("the descriptor layer's tar has no %s", descriptorFileName)
		}
		if err != nil {
			return nil, fmt.Errorf("the descriptor layer is not a tar: %w", err)
		}
		if path.Clean(h.Name) != descriptorFileName {
			continue
		}
		if h.Size > limit {
			return nil, &TooLargeError{What: "the component descriptor", Limit: limit, Flag: "ocm-max-descriptor-bytes"}
		}
		return io.ReadAll(io.LimitReader(tr, limit))
	}
}

// fetchBounded reads a small blob (config, descriptor, nested manifest)
// within MaxDescriptorBytes and verifies its digest.
func (repo *Repository) fetchBounded(ctx context.Context, r *remote.Repository, desc ocispec.Descriptor, what string) ([]byte, error) {
	limit := repo.Limits.withDefaults().MaxDescriptorBytes
	if desc.Size > limit {
		return nil, &TooLargeError{What: what, Limit: limit, Flag: "ocm-max-descriptor-bytes"}
	}
	rc, err := r.Fetch(ctx, desc)
	if err != nil {
		return nil, repo.registryError("fetching "+what, err)
	}
	data, err := readAllBounded(rc, desc, limit, what, "ocm-max-descriptor-bytes")
	if err != nil {
		return nil, repo.registryError("reading "+what, err)
	}
	return data, nil
}

// readAllBounded reads rc to its end within limit and checks the digest.
func readAllBounded(rc io.ReadCloser, desc ocispec.Descriptor, limit int64, what, flag string) ([]byte, error) {
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{What: what, Limit: limit, Flag: flag}
	}
	if desc.Digest != "" && desc.Digest.Validate() == nil && desc.Digest.Algorithm().FromBytes(data) != desc.Digest {
		return nil, fmt.Errorf("%s does not match its digest %s", what, desc.Digest)
	}
	return data, nil
}

// versionError turns a failed tag lookup into a NotFoundError or a
// RegistryError naming the component version.
func (repo *Repository) versionError(name, version string, err error) error {
	if errors.Is(err, errdef.ErrNotFound) {
		return &NotFoundError{What: fmt.Sprintf("component version %s:%s in %s", name, version, repo.Base)}
	}
	return repo.registryError(fmt.Sprintf("reading component version %s:%s", name, version), err)
}
