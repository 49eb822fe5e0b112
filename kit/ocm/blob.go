package ocm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"

	"github.com/terrace-dev/terrace/kit/bytesize"
)

// Media types an OCI artifact's content layer is picked by when the
// artifact has more than one layer.
var preferredArtifactLayers = []string{
	"application/vnd.cncf.helm.chart.content.v1.tar+gzip",
	"application/vnd.gardener.landscaper.blueprint.v1+tar+gzip",
	"application/vnd.gardener.landscaper.blueprint.layer.v1.tar",
	"application/vnd.gardener.landscaper.blueprint.v1+tar",
}

// BlobInfo describes the content Blob returns.
type BlobInfo struct {
	MediaType string
	Digest    digest.Digest
	Size      int64
}

// Blob opens the content of a resource of cd, a component version stored in
// repo: a local blob (a layer of the component version's manifest) or the
// content layer of an OCI artifact. The reader stops at MaxBlobBytes and
// fails when the content does not match its digest.
func Blob(ctx context.Context, repo *Repository, cd *ComponentDescriptor, res *Resource) (io.ReadCloser, BlobInfo, error) {
	return BlobOf(ctx, repo, cd, nil, res)
}

// BlobOf is Blob for a component version whose manifest layers are known
// already (Version.Layers): a local blob is then fetched without reading
// the manifest again. layers nil: the manifest is read.
func BlobOf(ctx context.Context, repo *Repository, cd *ComponentDescriptor, layers []ocispec.Descriptor, res *Resource) (io.ReadCloser, BlobInfo, error) {
	where := fmt.Sprintf("resource %q of component %s", res.Name, cd.Key())
	switch {
	case res.Access.IsLocalBlob():
		rc, info, err := localBlob(ctx, repo, cd, layers, res.Access)
		if err != nil {
			return nil, info, fmt.Errorf("%s (local blob in %s): %w", where, repo.Base, err)
		}
		return rc, info, nil
	case res.Access.IsOCIArtifact():
		ref, err := res.Access.OCIArtifactReference()
		if err != nil {
			return nil, BlobInfo{}, fmt.Errorf("%s: %w", where, err)
		}
		rc, info, err := ociArtifactBlob(ctx, repo, ref)
		if err != nil {
			return nil, info, fmt.Errorf("%s (OCI artifact %s): %w", where, ref, err)
		}
		return rc, info, nil
	}
	return nil, BlobInfo{}, fmt.Errorf("%s has access type %q: Terrace reads localBlob and ociArtifact", where, res.Access.Type)
}

func localBlob(ctx context.Context, repo *Repository, cd *ComponentDescriptor, layers []ocispec.Descriptor, access Access) (io.ReadCloser, BlobInfo, error) {
	lb, err := access.LocalBlob()
	if err != nil {
		return nil, BlobInfo{}, err
	}
	want, err := digest.Parse(lb.LocalReference)
	if err != nil {
		return nil, BlobInfo{}, fmt.Errorf("localReference %q is not a digest: %w", lb.LocalReference, err)
	}
	name, version := cd.Component.Name, cd.Component.Version
	r, err := repo.OCIRepository(repo.componentRepository(name))
	if err != nil {
		return nil, BlobInfo{}, err
	}
	if layers == nil {
		_, manifest, err := repo.fetchComponentManifest(ctx, r, tagRef(name, version))
		if err != nil {
			return nil, BlobInfo{}, err
		}
		layers = manifest.Layers
	}
	var layer *ocispec.Descriptor
	for i := range layers {
		if layers[i].Digest == want {
			layer = &layers[i]
			break
		}
	}
	if layer == nil {
		return nil, BlobInfo{}, &NotFoundError{What: fmt.Sprintf("layer %s in the manifest of component version %s:%s", want, name, version)}
	}
	mediaType := lb.MediaType
	if mediaType == "" {
		mediaType = layer.MediaType
	}
	return repo.openBlob(ctx, r, *layer, mediaType)
}

// openBlob fetches a blob within MaxBlobBytes.
func (repo *Repository) openBlob(ctx context.Context, r registry.Repository, desc ocispec.Descriptor, mediaType string) (io.ReadCloser, BlobInfo, error) {
	info := BlobInfo{MediaType: mediaType, Digest: desc.Digest, Size: desc.Size}
	limit := repo.Limits.withDefaults().MaxBlobBytes
	if desc.Size > limit {
		return nil, info, &TooLargeError{What: fmt.Sprintf("the blob (%s)", bytesize.Format(desc.Size)), Limit: limit, Flag: "ocm-max-blob-bytes"}
	}
	rc, err := r.Fetch(ctx, desc)
	if err != nil {
		return nil, info, repo.registryError("fetching blob "+desc.Digest.String(), err)
	}
	return &verifyingReader{rc: rc, limited: io.LimitReader(rc, desc.Size+1), size: desc.Size, verifier: desc.Digest.Verifier()}, info, nil
}

// ociArtifactBlob opens the content layer of the OCI artifact at ref.
func ociArtifactBlob(ctx context.Context, repo *Repository, ref string) (io.ReadCloser, BlobInfo, error) {
	parsed, err := registry.ParseReference(ref)
	if err != nil {
		return nil, BlobInfo{}, fmt.Errorf("not an OCI reference: %w", err)
	}
	if parsed.Reference == "" {
		return nil, BlobInfo{}, fmt.Errorf("the reference has neither tag nor digest")
	}
	artifactRepo := *repo
	artifactRepo.Base = parsed.Registry + "/" + parsed.Repository
	artifactRepo.PlainHTTP = repo.plainHTTPFor(parsed.Registry)
	r, err := artifactRepo.OCIRepository(artifactRepo.Base)
	if err != nil {
		return nil, BlobInfo{}, err
	}
	desc, rc, err := r.FetchReference(ctx, parsed.Reference)
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return nil, BlobInfo{}, &NotFoundError{What: "the artifact"}
		}
		return nil, BlobInfo{}, artifactRepo.registryError("resolving the artifact", err)
	}
	data, err := readAllBounded(rc, desc, artifactRepo.Limits.withDefaults().MaxDescriptorBytes, "the artifact's manifest", "ocm-max-descriptor-bytes")
	if err != nil {
		return nil, BlobInfo{}, artifactRepo.registryError("reading the artifact's manifest", err)
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest && desc.MediaType != "application/vnd.docker.distribution.manifest.v2+json" {
		return nil, BlobInfo{}, fmt.Errorf("the artifact is a %s: Terrace reads the content of image manifests only", desc.MediaType)
	}
	var manifest ocispec.Manifest
	if err := json.Unmarshal(data, &manifest); err != nil {
		return nil, BlobInfo{}, fmt.Errorf("the artifact's manifest is not JSON: %w", err)
	}
	layer, err := contentLayer(manifest.Layers)
	if err != nil {
		return nil, BlobInfo{}, err
	}
	return artifactRepo.openBlob(ctx, r, layer, layer.MediaType)
}

// plainHTTPFor tells whether host is spoken to in plain HTTP: the
// repository's own host when the repository is, others when PlainHTTPFor
// says so.
func (repo *Repository) plainHTTPFor(host string) bool {
	if host == repo.Host() {
		return repo.PlainHTTP
	}
	return repo.PlainHTTPFor != nil && repo.PlainHTTPFor(host)
}

// contentLayer is the only layer, or the one of a known content type.
func contentLayer(layers []ocispec.Descriptor) (ocispec.Descriptor, error) {
	if len(layers) == 1 {
		return layers[0], nil
	}
	for _, mt := range preferredArtifactLayers {
		for _, l := range layers {
			if l.MediaType == mt {
				return l, nil
			}
		}
	}
	return ocispec.Descriptor{}, fmt.Errorf("the artifact has %d layers and none of a chart or blueprint media type: its content is ambiguous", len(layers))
}

// verifyingReader reads a blob of a known size and digest and fails at its
// end when either differs.
type verifyingReader struct {
	rc       io.ReadCloser
	limited  io.Reader
	size     int64
	read     int64
	verifier digest.Verifier
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.limited.Read(p)
	v.read += int64(n)
	_, _ = v.verifier.Write(p[:n])
	if v.read > v.size {
		return n, fmt.Errorf("the blob is larger than its descriptor's size %d", v.size)
	}
	if errors.Is(err, io.EOF) {
		if v.read != v.size {
			return n, fmt.Errorf("the blob ended after %d of %d bytes", v.read, v.size)
		}
		if !v.verifier.Verified() {
			return n, fmt.Errorf("the blob does not match its digest")
		}
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.rc.Close() }
