package ocicheck

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
)

// PushImage pushes a container image of one layer, a file named name holding
// data, to repo (host:port/path) under tag.
func PushImage(ctx context.Context, repo, tag, name string, data []byte) (Pushed, error) {
	r, err := repository(repo)
	if err != nil {
		return Pushed{}, err
	}
	tarball, err := tarOf(name, data)
	if err != nil {
		return Pushed{}, err
	}
	gz, err := gzipOf(tarball)
	if err != nil {
		return Pushed{}, err
	}
	config, err := json.Marshal(ocispec.Image{
		Platform: ocispec.Platform{OS: "linux", Architecture: "amd64"},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(tarball)}},
	})
	if err != nil {
		return Pushed{}, err
	}
	configDesc, err := oras.PushBytes(ctx, r, ocispec.MediaTypeImageConfig, config)
	if err != nil {
		return Pushed{}, fmt.Errorf("pushing the image config to %s: %w", repo, err)
	}
	layer, err := oras.PushBytes(ctx, r, ocispec.MediaTypeImageLayerGzip, gz)
	if err != nil {
		return Pushed{}, fmt.Errorf("pushing the image layer to %s: %w", repo, err)
	}
	return pushManifest(ctx, r, tag, configDesc, []ocispec.Descriptor{layer})
}

// PullImage pulls the image pushed as p by its digest, checks every blob
// against its digest and each layer's uncompressed content against the
// config's diff ID, and returns the content of the file named name.
func PullImage(ctx context.Context, p Pushed, name string) ([]byte, error) {
	r, manifest, err := pullManifest(ctx, p)
	if err != nil {
		return nil, err
	}
	raw, err := content.FetchAll(ctx, r, manifest.Config)
	if err != nil {
		return nil, fmt.Errorf("pulling the config of %s: %w", p, err)
	}
	var config ocispec.Image
	if err := json.Unmarshal(raw, &config); err != nil {
		return nil, fmt.Errorf("config of %s: %w", p, err)
	}
	if len(config.RootFS.DiffIDs) != len(manifest.Layers) {
		return nil, fmt.Errorf("%s: %d layers, %d diff IDs", p, len(manifest.Layers), len(config.RootFS.DiffIDs))
	}
	var file []byte
	for i, l := range manifest.Layers {
		gz, err := content.FetchAll(ctx, r, l)
		if err != nil {
			return nil, fmt.Errorf("pulling layer %s of %s: %w", l.Digest, p, err)
		}
		tarball, err := gunzip(gz)
		if err != nil {
			return nil, fmt.Errorf("layer %s of %s: %w", l.Digest, p, err)
		}
		if got := digest.FromBytes(tarball); got != config.RootFS.DiffIDs[i] {
			return nil, fmt.Errorf("layer %s of %s unpacks to %s, want diff ID %s", l.Digest, p, got, config.RootFS.DiffIDs[i])
		}
		if f, ok, err := fileIn(tarball, name); err != nil {
			return nil, fmt.Errorf("layer %s of %s: %w", l.Digest, p, err)
		} else if ok {
			file = f
		}
	}
	if file == nil {
		return nil, fmt.Errorf("%s holds no file %s", p, name)
	}
	return file, nil
}

func tarOf(name string, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func gzipOf(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// fileIn returns the content of the file named name in tarball.
func fileIn(tarball []byte, name string) ([]byte, bool, error) {
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			return b, err == nil, err
		}
	}
}
