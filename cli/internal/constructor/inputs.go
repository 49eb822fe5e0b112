package constructor

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/terrace-dev/terrace/cli/internal/chart"
	"github.com/terrace-dev/terrace/kit/ocm"
)

// Media types inputs default to.
const (
	mediaTypeTar         = "application/x-tar"
	mediaTypeOctetStream = "application/octet-stream"
)

// buildInput builds an input's content: it returns the blob and, for a
// chart, the name hint of the artifact.
func (b *builder) buildInput(in *input, at []any) (ocm.LocalBlob, string, error) {
	switch in.Type {
	case "file", "dir", "helm":
	case "":
		return ocm.LocalBlob{}, "", b.errorf(at, "type", "an input needs a type: dir, file or helm")
	default:
		return ocm.LocalBlob{}, "", b.errorf(at, "type", "input type %q is not supported: dir, file or helm", in.Type)
	}
	if in.Path == "" {
		return ocm.LocalBlob{}, "", b.errorf(at, "path", "an input of type %q needs a path", in.Type)
	}
	p := in.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(b.dir, p)
	}
	info, err := os.Stat(p)
	if err != nil {
		return ocm.LocalBlob{}, "", b.errorf(at, "path", "%v", err)
	}
	switch in.Type {
	case "file":
		if info.IsDir() {
			return ocm.LocalBlob{}, "", b.errorf(at, "path", "%s is a directory: use an input of type dir", in.Path)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return ocm.LocalBlob{}, "", b.errorf(at, "path", "%v", err)
		}
		blob, err := compressed(data, in.MediaType, mediaTypeOctetStream, in.Compress)
		return blob, "", err
	case "dir":
		if !info.IsDir() {
			return ocm.LocalBlob{}, "", b.errorf(at, "path", "%s is not a directory", in.Path)
		}
		data, err := tarDir(p, in)
		if err != nil {
			return ocm.LocalBlob{}, "", b.errorf(at, "path", "%v", err)
		}
		blob, err := compressed(data, in.MediaType, mediaTypeTar, in.Compress)
		return blob, "", err
	case "helm":
		c, err := chart.Load(p)
		if err != nil {
			return ocm.LocalBlob{}, "", b.errorf(at, "path", "%v", err)
		}
		return ocm.BytesBlob(chart.ContentMediaType, c.Archive), c.Name + ":" + c.Version, nil
	}
	return ocm.LocalBlob{}, "", nil
}

// compressed gzips data when asked; the media type (given or the default)
// then ends in +gzip.
func compressed(data []byte, mediaType, defaultMediaType string, compress bool) (ocm.LocalBlob, error) {
	if mediaType == "" {
		mediaType = defaultMediaType
	}
	if !compress {
		return ocm.BytesBlob(mediaType, data), nil
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(data); err != nil {
		return ocm.LocalBlob{}, err
	}
	if err := gz.Close(); err != nil {
		return ocm.LocalBlob{}, err
	}
	if !strings.HasSuffix(mediaType, "gzip") {
		mediaType += "+gzip"
	}
	return ocm.BytesBlob(mediaType, buf.Bytes()), nil
}

// tarDir writes the files of dir that the include and exclude patterns
// select (globs on the path relative to dir, or its base name), under the
// directory's name when preserveDir is set. Times are fixed so that equal
// content makes equal blobs.
func tarDir(dir string, in *input) ([]byte, error) {
	prefix := ""
	if in.PreserveDir {
		prefix = filepath.Base(dir) + "/"
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if matchesAny(in.ExcludeFiles, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if len(in.IncludeFiles) > 0 {
				return nil
			}
			return tw.WriteHeader(&tar.Header{Name: prefix + rel + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)})
		}
		if len(in.IncludeFiles) > 0 && !matchesAny(in.IncludeFiles, rel) {
			return nil
		}
		return tarEntry(tw, p, prefix+rel, d)
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func tarEntry(tw *tar.Writer, p, name string, d fs.DirEntry) error {
	if d.Type()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		return tw.WriteHeader(&tar.Header{Name: name, Linkname: target, Typeflag: tar.TypeSymlink, Mode: 0o777, ModTime: time.Unix(0, 0)})
	}
	if !d.Type().IsRegular() {
		return nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	info, err := d.Info()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(info.Mode().Perm()), Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err = tw.Write(data)
	return err
}

func matchesAny(patterns []string, rel string) bool {
	for _, pattern := range patterns {
		if ok, _ := path.Match(pattern, rel); ok {
			return true
		}
		if ok, _ := path.Match(pattern, path.Base(rel)); ok {
			return true
		}
		// A pattern naming a directory selects what is under it.
		if strings.HasPrefix(rel, strings.TrimSuffix(pattern, "/")+"/") {
			return true
		}
	}
	return false
}
