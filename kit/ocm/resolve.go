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
	return repo.readVersion(ctx, tagRef(name, version))
}

// ResolveVersionByDigest reads the component version of component name
// stored in the manifest at digest dg, wherever its tag points now: who
// resolved the digest before reads that same content again. The manifest
// must hash to dg, and its descriptor must be of component name.
func ResolveVersionByDigest(ctx context.Context, repo *Repository, name string, dg digest.Digest) (*Version, error) {
	if name == "" {
		return nil, fmt.Errorf("a component version needs a component name (reading digest %s)", dg)
	}
	if err := dg.Validate(); err != nil {
		return nil, fmt.Errorf("component %s: %q is not a manifest digest: %w", name, dg, err)
	}
	return repo.readVersion(ctx, manifestRef{name: name, reference: dg.String(), digest: dg, label: name + "@" + dg.String()})
}

// manifestRef names the manifest of a component version: by tag (version
// set) or by digest (digest set).
type manifestRef struct {
	name, version string
	reference     string
	digest        digest.Digest
	// label names it in messages: "<name>:<version>" or "<name>@<digest>".
	label string
}

func tagRef(name, version string) manifestRef {
	return manifestRef{name: name, version: version, reference: VersionToTag(version), label: name + ":" + version}
}

func (repo *Repository) readVersion(ctx context.Context, ref manifestRef) (*Version, error) {
	r, err := repo.OCIRepository(repo.componentRepository(ref.name))
	if err != nil {
		return nil, err
	}
	manifestDesc, manifest, err := repo.fetchComponentManifest(ctx, r, ref)
	if err != nil {
		return nil, err
	}
	layer, err := repo.descriptorLayer(ctx, r, manifest)
	if err != nil {
		return nil, fmt.Errorf("component %s in %s: %w", ref.label, repo.Base, err)
	}
	data, err := repo.fetchBounded(ctx, r, layer, "the component descriptor layer")
	if err != nil {
		return nil, fmt.Errorf("component %s in %s: %w", ref.label, repo.Base, err)
	}
	cd, err := decodeDescriptorLayer(layer.MediaType, data, repo.Limits.withDefaults().MaxDescriptorBytes)
	if err != nil {
		return nil, fmt.Errorf("component %s in %s: %w", ref.label, repo.Base, err)
	}
	if cd.Component.Name != ref.name || (ref.version != "" && cd.Component.Version != ref.version) {
		return nil, fmt.Errorf("component %s in %s: the descriptor stored there is of %s", ref.label, repo.Base, cd.Key())
	}
	return &Version{Descriptor: cd, Digest: manifestDesc.Digest, Layers: manifest.Layers}, nil
}

// fetchComponentManifest fetches the manifest ref names; an index is
// followed to its descriptor manifest.
func (repo *Repository) fetchComponentManifest(ctx context.Context, r *remote.Repository, ref manifestRef) (ocispec.Descriptor, *ocispec.Manifest, error) {
	data, desc, err := repo.fetchManifestBytes(ctx, r, ref)
	if err != nil {
		return desc, nil, err
	}
	if desc.MediaType == ocispec.MediaTypeImageIndex {
		inner, err := descriptorManifestOf(data)
		if err != nil {
			return desc, nil, fmt.Errorf("component %s in %s: %w", ref.label, repo.Base, err)
		}
		data, err = repo.fetchBounded(ctx, r, inner, "the component version's descriptor manifest")
		if err != nil {
			return desc, nil, fmt.Errorf("component %s in %s: %w", ref.label, repo.Base, err)
		}
	}
	var manifest ocispec.Manifest
	if err := json.Unmarshal(data, &manifest); err != nil {
		return desc, nil, fmt.Errorf("component %s in %s: the manifest is not JSON: %w", ref.label, repo.Base, err)
	}
	return desc, &manifest, nil
}

// fetchManifestBytes reads the top manifest ref names. Read by digest, the
// content must hash to that digest whatever the registry says it is.
func (repo *Repository) fetchManifestBytes(ctx context.Context, r *remote.Repository, ref manifestRef) ([]byte, ocispec.Descriptor, error) {
	desc, rc, err := r.FetchReference(ctx, ref.reference)
	if err != nil {
		return nil, desc, repo.manifestError(ref, err)
	}
	data, err := readAllBounded(rc, desc, repo.Limits.withDefaults().MaxDescriptorBytes, "the component version's manifest", "ocm-max-descriptor-bytes")
	if err != nil {
		return nil, desc, repo.registryError("reading component "+ref.label, err)
	}
	// The descriptor's digest is the registry's word when it did not
	// say how long the manifest is: the content is checked here.
	if ref.digest != "" {
		if got := ref.digest.Algorithm().FromBytes(data); got != ref.digest {
			return nil, desc, repo.registryError("reading component "+ref.label, fmt.Errorf("the registry returned a manifest of digest %s for %s", got, ref.digest))
		}
		desc.Digest = ref.digest
	}
	return data, desc, nil
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
	return repo.manifestError(tagRef(name, version), err)
}

// manifestError turns a failed manifest read into a NotFoundError or a
// RegistryError naming the component version.
func (repo *Repository) manifestError(ref manifestRef, err error) error {
	if errors.Is(err, errdef.ErrNotFound) {
		return &NotFoundError{What: fmt.Sprintf("component version %s in %s", ref.label, repo.Base)}
	}
	return repo.registryError("reading component version "+ref.label, err)
}
