package components

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/bytesize"
	"github.com/terrace-dev/terrace/kit/ocm"
)

// BlueprintMediaTypes are the media types a blueprint resource's content
// may have: a tar or a gzipped tar of the blueprint's filesystem. Whether it
// is gzipped is read from the content, as blueprint producers disagree.
var BlueprintMediaTypes = []string{
	"application/vnd.gardener.landscaper.blueprint.v1+tar+gzip",
	"application/vnd.gardener.landscaper.blueprint.v1+tar",
	"application/vnd.gardener.landscaper.blueprint.layer.v1.tar",
	"application/vnd.gardener.landscaper.blueprint.layer.v1.tar+gzip",
	"application/vnd.oci.image.layer.v1.tar",
	"application/vnd.oci.image.layer.v1.tar+gzip",
	"application/x-tar",
	"application/tar",
	"application/x-tar+gzip",
	"application/tar+gzip",
	"application/x-gtar",
	"application/gzip",
	"application/x-gzip",
}

// ResourceRef selects a resource of a component version.
type ResourceRef struct {
	Name string
	// ExtraIdentity, when set, must match the resource's.
	ExtraIdentity map[string]string
}

// Blueprint is a blueprint read from a component version.
type Blueprint struct {
	// Files is the blueprint's filesystem; it holds blueprint.yaml.
	Files map[string]string
	// Digest is the digest of the archive it was extracted from.
	Digest digest.Digest
	// Component and Resource name where it came from.
	Component string
	Resource  string
}

// Blueprint reads the blueprint resource ref of component c (cv.Root for
// an installation's blueprint.ref.resourceName).
func (r *Resolver) Blueprint(ctx context.Context, c *Component, ref ResourceRef) (*Blueprint, error) {
	res, err := c.Descriptor.Resource(ref.Name, ref.ExtraIdentity)
	if err != nil {
		return nil, fmt.Errorf("blueprint: %w", err)
	}
	where := fmt.Sprintf("blueprint resource %q of component %s", res.Name, c.Key())
	if c.Repository == nil {
		return nil, fmt.Errorf("%s: the component has no repository context to read the resource from", where)
	}
	key, err := r.contentDigest(ctx, c, res)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if key != "" {
		if bp, ok := r.memory.get("bp:" + key.String()); ok {
			return withOrigin(bp.(*Blueprint), c, res), nil
		}
	}
	v, err, _ := r.flight.Do("bp:"+key.String()+":"+c.Key()+"/"+res.Name, func() (any, error) {
		// A flight that ended between the lookup above and this one
		// cached the blueprint already.
		if key != "" {
			if bp, ok := r.memory.get("bp:" + key.String()); ok {
				return bp, nil
			}
		}
		return r.readBlueprint(ctx, c, res, key)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return withOrigin(v.(*Blueprint), c, res), nil
}

// withOrigin is a copy of a cached blueprint for one caller, who may
// change its files without changing the cache's.
func withOrigin(bp *Blueprint, c *Component, res *ocm.Resource) *Blueprint {
	out := *bp
	out.Files = make(map[string]string, len(bp.Files))
	for name, content := range bp.Files {
		out.Files[name] = content
	}
	out.Component, out.Resource = c.Key(), res.Name
	return &out
}

// contentDigest is the digest that keys a resource's content in the cache
// without reading it: a local blob's localReference, an OCI artifact's
// digest (its tag looked up). Empty means not cacheable.
func (r *Resolver) contentDigest(ctx context.Context, c *Component, res *ocm.Resource) (digest.Digest, error) {
	switch {
	case res.Access.IsLocalBlob():
		lb, err := res.Access.LocalBlob()
		if err != nil {
			return "", err
		}
		if d, err := digest.Parse(lb.LocalReference); err == nil {
			return d, nil
		}
		return "", nil
	case res.Access.IsOCIArtifact():
		ref, err := res.Access.OCIArtifactReference()
		if err != nil {
			return "", err
		}
		parsed, err := registry.ParseReference(ref)
		if err != nil {
			return "", fmt.Errorf("OCI artifact %q is not an OCI reference: %w", ref, err)
		}
		if d, err := parsed.Digest(); err == nil {
			return d, nil
		}
		repo, err := c.Repository.OCIRepository(parsed.Registry + "/" + parsed.Repository)
		if err != nil {
			return "", err
		}
		repo.PlainHTTP = (parsed.Registry == c.Repository.Host() && c.Repository.PlainHTTP) || ocm.IsLoopbackHost(parsed.Registry)
		desc, err := repo.Resolve(ctx, parsed.Reference)
		if err != nil {
			return "", fmt.Errorf("OCI artifact %s: %w", ref, err)
		}
		return desc.Digest, nil
	}
	return "", fmt.Errorf("access type %q is not supported: Terrace reads localBlob and ociArtifact", res.Access.Type)
}

// readBlueprint reads the archive (from disk when cached there), extracts
// it and caches the result under key.
func (r *Resolver) readBlueprint(ctx context.Context, c *Component, res *ocm.Resource, key digest.Digest) (*Blueprint, error) {
	var data []byte
	mediaType := mediaTypeOf(res)
	if r.disk != nil && key != "" {
		data, _ = r.disk.get(key)
	}
	if data == nil {
		rc, info, err := ocm.BlobOf(ctx, c.Repository, c.Descriptor, c.layers, res)
		if err != nil {
			return nil, err
		}
		data, err = io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the blob: %w", err)
		}
		if mediaType == "" || res.Access.IsOCIArtifact() {
			mediaType = info.MediaType
		}
		if r.disk != nil && info.Digest == key {
			r.disk.put(key, data)
		}
	}
	files, err := r.extract(mediaType, data)
	if err != nil {
		return nil, err
	}
	bp := &Blueprint{Files: files, Digest: digest.FromBytes(data)}
	if key != "" {
		r.memory.put("bp:"+key.String(), bp, filesSize(files))
	}
	return bp, nil
}

// mediaTypeOf is the media type a local blob access declares.
func mediaTypeOf(res *ocm.Resource) string {
	if lb, err := res.Access.LocalBlob(); err == nil {
		return lb.MediaType
	}
	return ""
}

func filesSize(files map[string]string) int64 {
	var n int64
	for name, content := range files {
		n += int64(len(name) + len(content))
	}
	return n
}

// extract reads a blueprint archive of an accepted media type into a
// filesystem map within the bounds.
func (r *Resolver) extract(mediaType string, data []byte) (map[string]string, error) {
	base, _, _ := strings.Cut(mediaType, ";")
	accepted := false
	for _, mt := range BlueprintMediaTypes {
		accepted = accepted || strings.EqualFold(strings.TrimSpace(base), mt)
	}
	if !accepted {
		return nil, fmt.Errorf("media type %q is not a blueprint: Terrace reads a tar or tar+gzip such as application/vnd.gardener.landscaper.blueprint.v1+tar+gzip", mediaType)
	}
	var in io.Reader = bytes.NewReader(data)
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		gz, err := gzip.NewReader(in)
		if err != nil {
			return nil, fmt.Errorf("the blueprint archive is not valid gzip: %w", err)
		}
		in = gz
	}
	files, err := r.untar(in)
	if err != nil {
		return nil, err
	}
	if _, ok := files[lsv1alpha1.BlueprintFileName]; !ok {
		return nil, fmt.Errorf("the archive has no %s at its root: not a blueprint", lsv1alpha1.BlueprintFileName)
	}
	return files, nil
}

// untar reads regular files; directories are implied, links refused, and
// the decompressed stream is bounded so that a small gzip cannot expand
// without end.
func (r *Resolver) untar(in io.Reader) (map[string]string, error) {
	maxFiles, maxBytes := r.opts.MaxBlueprintFiles, r.opts.MaxBlueprintBytes
	limited := &io.LimitedReader{R: in, N: 2*maxBytes + int64(maxFiles+8)*2048}
	tr := tar.NewReader(limited)
	files := map[string]string{}
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			if limited.N <= 0 {
				return nil, tooLarge(maxBytes)
			}
			return nil, fmt.Errorf("the blueprint archive is not a tar: %w", err)
		}
		name, err := cleanPath(h.Name)
		if err != nil {
			return nil, err
		}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader:
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("the blueprint archive's entry %q is a link or special file: only files and directories are allowed", h.Name)
		}
		if name == "" {
			continue
		}
		if len(files) >= maxFiles {
			return nil, fmt.Errorf("the blueprint has more than %d files (--%s)", maxFiles, FlagMaxBlueprintFiles)
		}
		if total += h.Size; total > maxBytes {
			return nil, tooLarge(maxBytes)
		}
		content, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil {
			return nil, fmt.Errorf("reading %q from the blueprint archive: %w", h.Name, err)
		}
		files[name] = string(content)
	}
}

func tooLarge(limit int64) error {
	return fmt.Errorf("the blueprint's files are larger than %s together (--%s)", bytesize.Format(limit), FlagMaxBlueprintBytes)
}

// cleanPath is an archive entry's path inside the blueprint; one that is
// absolute or climbs out of it is refused.
func cleanPath(name string) (string, error) {
	n := strings.ReplaceAll(name, "\\", "/")
	if strings.HasPrefix(n, "/") {
		return "", fmt.Errorf("the blueprint archive's entry %q is an absolute path", name)
	}
	for _, seg := range strings.Split(n, "/") {
		if seg == ".." {
			return "", fmt.Errorf("the blueprint archive's entry %q leaves the blueprint (..)", name)
		}
	}
	n = path.Clean(n)
	if n == "." {
		return "", nil
	}
	return n, nil
}
