package ocm

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"
)

// LocalBlob is the content of a local blob to push with a component
// version; the descriptor's localBlob access names it by Digest.
type LocalBlob struct {
	MediaType string
	Digest    digest.Digest
	Size      int64
	// Open opens the content; it is called once, when the registry does not
	// have the blob yet.
	Open func() (io.ReadCloser, error)
}

// BytesBlob is a LocalBlob of data in memory.
func BytesBlob(mediaType string, data []byte) LocalBlob {
	return LocalBlob{
		MediaType: mediaType,
		Digest:    digest.FromBytes(data),
		Size:      int64(len(data)),
		Open:      func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
	}
}

// Push writes cd and its local blobs to repo as the OCI mapping lays it
// out. Every localBlob access of cd must name one of blobs by digest. The
// repository is appended to the descriptor's repositoryContexts unless it
// is already the last one. Push returns the manifest's descriptor.
func Push(ctx context.Context, repo *Repository, cd *ComponentDescriptor, blobs []LocalBlob) (ocispec.Descriptor, error) {
	out := *cd
	out.Component.RepositoryContexts = withRepositoryContext(cd.Component.RepositoryContexts, repo.Base)
	if err := out.Validate(); err != nil {
		return ocispec.Descriptor{}, err
	}
	byDigest := map[digest.Digest]LocalBlob{}
	for _, b := range blobs {
		byDigest[b.Digest] = b
	}
	layers, err := localBlobLayers(&out, byDigest)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	r, err := repo.OCIRepository(repo.componentRepository(out.Component.Name))
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	for _, l := range layers {
		if err := pushBlob(ctx, r, byDigest[l.Digest], l); err != nil {
			return ocispec.Descriptor{}, repo.registryError(fmt.Sprintf("pushing a local blob of component %s", out.Key()), err)
		}
	}
	descLayer, err := pushDescriptorLayer(ctx, r, &out)
	if err != nil {
		return ocispec.Descriptor{}, repo.registryError(fmt.Sprintf("pushing the descriptor of component %s", out.Key()), err)
	}
	config, err := json.Marshal(ComponentConfig{ComponentDescriptorLayer: &descLayer})
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	configDesc, err := oras.PushBytes(ctx, r, MediaTypeComponentConfig, config)
	if err != nil {
		return ocispec.Descriptor{}, repo.registryError(fmt.Sprintf("pushing the component config of %s", out.Key()), err)
	}
	manifest, err := oras.PackManifest(ctx, r, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		ConfigDescriptor:    &configDesc,
		Layers:              append([]ocispec.Descriptor{descLayer}, layers...),
		ManifestAnnotations: map[string]string{AnnotationComponentVersion: componentDescriptorsPrefix + out.Component.Name + ":" + out.Component.Version},
	})
	if err != nil {
		return ocispec.Descriptor{}, repo.registryError(fmt.Sprintf("pushing the manifest of component %s", out.Key()), err)
	}
	if err := r.Tag(ctx, manifest, VersionToTag(out.Component.Version)); err != nil {
		return ocispec.Descriptor{}, repo.registryError(fmt.Sprintf("tagging component %s", out.Key()), err)
	}
	return manifest, nil
}

// withRepositoryContext appends the OCI repository context of base unless it
// is already the last one.
func withRepositoryContext(contexts []RepositoryContext, base string) []RepositoryContext {
	here := RepositoryContext{Type: "OCIRegistry", BaseURL: base, ComponentNameMapping: "urlPath"}
	out := append([]RepositoryContext{}, contexts...)
	if n := len(out); n > 0 {
		last := out[n-1]
		if IsOCIRepositoryType(last.Type) && last.BaseURL == base && last.SubPath == "" {
			return out
		}
	}
	return append(out, here)
}

// localBlobLayers lists the layers of the local blobs cd's resources and
// sources name, each once, in the order they are named.
func localBlobLayers(cd *ComponentDescriptor, blobs map[digest.Digest]LocalBlob) ([]ocispec.Descriptor, error) {
	var layers []ocispec.Descriptor
	seen := map[digest.Digest]bool{}
	add := func(kind, name string, access Access) error {
		if !access.IsLocalBlob() {
			return nil
		}
		lb, err := access.LocalBlob()
		if err != nil {
			return fmt.Errorf("%s %q of component %s: %w", kind, name, cd.Key(), err)
		}
		d, err := digest.Parse(lb.LocalReference)
		if err != nil {
			return fmt.Errorf("%s %q of component %s: localReference %q is not a digest", kind, name, cd.Key(), lb.LocalReference)
		}
		b, ok := blobs[d]
		if !ok {
			return fmt.Errorf("%s %q of component %s: no content given for its local blob %s", kind, name, cd.Key(), d)
		}
		if seen[d] {
			return nil
		}
		seen[d] = true
		mediaType := lb.MediaType
		if mediaType == "" {
			mediaType = b.MediaType
		}
		layers = append(layers, ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: b.Size})
		return nil
	}
	for _, r := range cd.Component.Resources {
		if err := add("resource", r.Name, r.Access); err != nil {
			return nil, err
		}
	}
	for _, s := range cd.Component.Sources {
		if err := add("source", s.Name, s.Access); err != nil {
			return nil, err
		}
	}
	return layers, nil
}

func pushBlob(ctx context.Context, r *remote.Repository, b LocalBlob, desc ocispec.Descriptor) error {
	exists, err := r.Blobs().Exists(ctx, desc)
	if err != nil || exists {
		return err
	}
	rc, err := b.Open()
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	return r.Blobs().Push(ctx, desc, rc)
}

// pushDescriptorLayer pushes the descriptor as a tar holding
// component-descriptor.yaml, the form every OCM reader accepts.
func pushDescriptorLayer(ctx context.Context, r *remote.Repository, cd *ComponentDescriptor) (ocispec.Descriptor, error) {
	yamlData, err := EncodeV2(cd)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	data, err := descriptorTar(yamlData)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return oras.PushBytes(ctx, r, MediaTypeComponentDescriptorTar, data)
}

// descriptorTar is a tar of one file, component-descriptor.yaml, with a
// fixed time so that equal descriptors make equal layers.
func descriptorTar(yamlData []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Name: descriptorFileName, Mode: 0o644, Size: int64(len(yamlData)),
		Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0), Format: tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(yamlData); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
