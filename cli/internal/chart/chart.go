// Package chart packages Helm charts as Helm does (a gzipped tar of the chart
// directory under the chart's name) and pushes them to OCI registries with
// the media types of `helm push`.
package chart

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"
	"sigs.k8s.io/yaml"
)

// Media types of a Helm chart in an OCI registry.
const (
	ConfigMediaType  = "application/vnd.cncf.helm.config.v1+json"
	ContentMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// Chart is a packaged chart.
type Chart struct {
	Name    string
	Version string
	// Metadata is Chart.yaml as JSON: the OCI config of the chart.
	Metadata []byte
	// Archive is the chart's .tgz.
	Archive []byte
}

type chartYAML struct {
	APIVersion string `json:"apiVersion"`
	Name       string `json:"name"`
	Version    string `json:"version"`
}

// Load reads a chart from a directory (packaging it) or a .tgz file.
func Load(p string) (*Chart, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", p, err)
	}
	if info.IsDir() {
		return Package(p)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", p, err)
	}
	return FromArchive(p, data)
}

// metadata parses Chart.yaml: it needs a name and a version.
func metadata(where string, raw []byte) (chartYAML, []byte, error) {
	var meta chartYAML
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		return meta, nil, fmt.Errorf("%s: Chart.yaml is not YAML: %w", where, err)
	}
	if meta.Name == "" || meta.Version == "" {
		return meta, nil, fmt.Errorf("%s: Chart.yaml needs a name and a version", where)
	}
	asJSON, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return meta, nil, err
	}
	return meta, asJSON, nil
}

// FromArchive reads the Chart.yaml of a chart archive.
func FromArchive(where string, archive []byte) (*Chart, error) {
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("chart %s is neither a directory nor a .tgz: %w", where, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("chart %s: the archive has no <chart>/Chart.yaml", where)
		}
		if err != nil {
			return nil, fmt.Errorf("chart %s: reading the archive: %w", where, err)
		}
		parts := strings.Split(path.Clean(h.Name), "/")
		if len(parts) != 2 || parts[1] != "Chart.yaml" {
			continue
		}
		raw, err := io.ReadAll(io.LimitReader(tr, 1<<20))
		if err != nil {
			return nil, err
		}
		meta, asJSON, err := metadata("chart "+where, raw)
		if err != nil {
			return nil, err
		}
		return &Chart{Name: meta.Name, Version: meta.Version, Metadata: asJSON, Archive: archive}, nil
	}
}

// Package packages a chart directory as `helm package` lays it out: every
// file not matched by .helmignore, under <name>/.
func Package(dir string) (*Chart, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("chart directory %s: %w", dir, err)
	}
	meta, asJSON, err := metadata("chart directory "+dir, raw)
	if err != nil {
		return nil, err
	}
	ignore, err := readHelmIgnore(dir)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if ignore.matches(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		return addFile(tw, p, meta.Name+"/"+rel)
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("packaging chart %s: %w", dir, err)
	}
	return &Chart{Name: meta.Name, Version: meta.Version, Metadata: asJSON, Archive: buf.Bytes()}, nil
}

// addFile writes one file with a fixed time, so that equal charts make
// equal archives (and digests).
func addFile(tw *tar.Writer, src, name string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err = tw.Write(data)
	return err
}

// helmIgnore is the subset of .helmignore Terrace honours: one glob per
// line matched against the path and the base name, a trailing "/" for
// directories only, "#" comments.
type helmIgnore []string

func readHelmIgnore(dir string) (helmIgnore, error) {
	f, err := os.Open(filepath.Join(dir, ".helmignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out helmIgnore
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}

func (h helmIgnore) matches(rel string, isDir bool) bool {
	for _, pattern := range h {
		dirOnly := strings.HasSuffix(pattern, "/")
		pattern = strings.TrimSuffix(pattern, "/")
		if dirOnly && !isDir {
			continue
		}
		if ok, _ := path.Match(pattern, rel); ok {
			return true
		}
		if ok, _ := path.Match(pattern, path.Base(rel)); ok {
			return true
		}
	}
	return false
}

// Push pushes c to the OCI repository r under tag, as `helm push` does:
// config of the chart's metadata, one content layer.
func Push(ctx context.Context, r *remote.Repository, c *Chart, tag string) (ocispec.Descriptor, error) {
	config, err := oras.PushBytes(ctx, r, ConfigMediaType, c.Metadata)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("pushing the chart's config: %w", err)
	}
	layer, err := oras.PushBytes(ctx, r, ContentMediaType, c.Archive)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("pushing the chart archive: %w", err)
	}
	manifest, err := oras.PackManifest(ctx, r, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		ConfigDescriptor: &config,
		Layers:           []ocispec.Descriptor{layer},
		ManifestAnnotations: map[string]string{
			ocispec.AnnotationTitle:   c.Name,
			ocispec.AnnotationVersion: c.Version,
		},
	})
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("pushing the manifest: %w", err)
	}
	if err := r.Tag(ctx, manifest, tag); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("tagging %s: %w", tag, err)
	}
	return manifest, nil
}
