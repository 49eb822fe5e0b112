package constructor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/terrace-dev/terrace/kit/ocm"
)

// ArchiveDescriptorFile is the descriptor of a component archive directory.
const ArchiveDescriptorFile = "component-descriptor.yaml"

// IsArchive tells whether path is a component archive directory.
func IsArchive(path string) bool {
	info, err := os.Stat(filepath.Join(path, ArchiveDescriptorFile))
	return err == nil && !info.IsDir()
}

// LoadArchive reads a component archive directory: component-descriptor.yaml
// (schema v2 or v3alpha1) and blobs/. Every local blob the descriptor names
// by file (localFilesystemBlob filename, or a localBlob localReference that
// is a file in blobs/) becomes a localBlob named by digest; a blob that is a
// directory is packed as a tar (gzipped when its media type says so).
func LoadArchive(dir string) (Built, error) {
	descPath := filepath.Join(dir, ArchiveDescriptorFile)
	data, err := os.ReadFile(descPath)
	if err != nil {
		return Built{}, err
	}
	cd, err := ocm.Decode(data)
	if err != nil {
		return Built{}, fmt.Errorf("%s: %w", descPath, err)
	}
	var blobs []ocm.LocalBlob
	convert := func(kind, name string, access *ocm.Access) error {
		if !access.IsLocalBlob() {
			return nil
		}
		lb, err := access.LocalBlob()
		if err != nil {
			return fmt.Errorf("%s: %s %q: %w", descPath, kind, name, err)
		}
		blob, found, err := archiveBlob(dir, lb)
		if err != nil {
			return fmt.Errorf("%s: %s %q: %w", descPath, kind, name, err)
		}
		if !found {
			return fmt.Errorf("%s: %s %q: its local blob %q is not in %s", descPath, kind, name, lb.LocalReference, filepath.Join(dir, "blobs"))
		}
		blobs = append(blobs, blob)
		*access = ocm.NewLocalBlobAccess(ocm.LocalBlobAccess{
			LocalReference: blob.Digest.String(), MediaType: blob.MediaType,
			ReferenceName: lb.ReferenceName, GlobalAccess: lb.GlobalAccess,
		})
		return nil
	}
	for i := range cd.Component.Resources {
		r := &cd.Component.Resources[i]
		if err := convert("resource", r.Name, &r.Access); err != nil {
			return Built{}, err
		}
	}
	for i := range cd.Component.Sources {
		s := &cd.Component.Sources[i]
		if err := convert("source", s.Name, &s.Access); err != nil {
			return Built{}, err
		}
	}
	return Built{Descriptor: cd, Blobs: blobs}, nil
}

// archiveBlob reads blobs/<ref> (a ":" in a digest is written "." in file
// names).
func archiveBlob(dir string, lb ocm.LocalBlobAccess) (ocm.LocalBlob, bool, error) {
	ref := lb.LocalReference
	if strings.Contains(ref, "..") || strings.ContainsAny(ref, `/\`) {
		return ocm.LocalBlob{}, false, fmt.Errorf("local blob name %q is not a file name in blobs/", ref)
	}
	for _, name := range []string{ref, strings.Replace(ref, ":", ".", 1)} {
		p := filepath.Join(dir, "blobs", name)
		info, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return ocm.LocalBlob{}, false, err
		}
		mediaType := lb.MediaType
		if mediaType == "" {
			mediaType = mediaTypeOctetStream
		}
		if info.IsDir() {
			data, err := tarDir(p, &input{})
			if err != nil {
				return ocm.LocalBlob{}, false, err
			}
			blob, err := compressed(data, mediaType, mediaTypeTar, strings.HasSuffix(mediaType, "gzip"))
			return blob, true, err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return ocm.LocalBlob{}, false, err
		}
		return ocm.BytesBlob(mediaType, data), true, nil
	}
	return ocm.LocalBlob{}, false, nil
}
