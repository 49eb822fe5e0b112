package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// nonRootID is the user and group every image runs as: no image the project
// builds needs root inside its container.
const nonRootID = 65532

// caBundlePath is where the base image keeps its CA certificates, the path Go
// and most TLS stacks look in first on Linux.
const caBundlePath = "etc/ssl/certs/ca-certificates.crt"

// file is one entry of a layer.
type file struct {
	name string
	mode int64
	dir  bool
	data []byte
}

// layerOf builds an uncompressed tar layer of files. Every entry carries the
// same fixed time and root ownership unless told otherwise, so the same inputs
// always give the same digest and a rebuild pushes nothing new.
func layerOf(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if f.dir {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.data))
		}
		if path.Base(f.name) == "nonroot" {
			hdr.Uid, hdr.Gid = nonRootID, nonRootID
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// baseFiles is the root file system of the base image: the users root and
// nonroot, the CA bundle and a writable /tmp.
func baseFiles(caBundle []byte) []file {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRootID, nonRootID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRootID)
	return []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/ssl", mode: 0o755, dir: true},
		{name: "etc/ssl/certs", mode: 0o755, dir: true},
		{name: caBundlePath, mode: 0o644, data: caBundle},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, dir: true},
		{name: "root", mode: 0o700, dir: true},
		{name: "tmp", mode: 0o1777, dir: true},
	}
}

// baseImage is the image every other image of the project builds on.
func baseImage(caBundleFile, arch string) (v1.Image, error) {
	ca, err := os.ReadFile(caBundleFile)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle for the base image: %w (set --ca-bundle)", err)
	}
	layer, err := layerOf(baseFiles(ca))
	if err != nil {
		return nil, err
	}
	// The configuration first: AppendLayers records each layer's diff ID in it.
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: time.Unix(0, 0)},
		Config: v1.Config{
			User:       fmt.Sprintf("%d:%d", nonRootID, nonRootID),
			WorkingDir: "/home/nonroot",
			Env: []string{
				"PATH=/usr/local/bin:/usr/bin:/bin",
				"SSL_CERT_FILE=/" + caBundlePath,
			},
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.AppendLayers(img, layer)
}

// withBinary is img with the executable at binPath added as /<name> and set
// as the entrypoint, with labels in its configuration.
func withBinary(img v1.Image, name, binPath string, labels map[string]string) (v1.Image, error) {
	data, err := os.ReadFile(binPath)
	if err != nil {
		return nil, err
	}
	layer, err := layerOf([]file{{name: name, mode: 0o755, data: data}})
	if err != nil {
		return nil, err
	}
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Config.Entrypoint = []string{"/" + name}
	if len(labels) > 0 {
		cfg.Config.Labels = map[string]string{}
		for k, v := range labels {
			cfg.Config.Labels[k] = v
		}
	}
	return mutate.ConfigFile(img, cfg)
}
