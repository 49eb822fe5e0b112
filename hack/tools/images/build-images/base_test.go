package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// files reads the flattened root file system of img: path -> content.
func files(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(hdr.Name, "/")] = string(data)
	}
}

// checkDiffIDs fails unless the configuration records each layer's diff ID,
// in order: containerd refuses to unpack an image where they disagree.
func checkDiffIDs(t *testing.T, name string, img v1.Image) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		t.Fatalf("%s image: %d layers, %d diff IDs", name, len(layers), len(cfg.RootFS.DiffIDs))
	}
	for i, l := range layers {
		d, err := l.DiffID()
		if err != nil {
			t.Fatal(err)
		}
		if d != cfg.RootFS.DiffIDs[i] {
			t.Fatalf("%s image: layer %d has diff ID %s, the configuration says %s", name, i, d, cfg.RootFS.DiffIDs[i])
		}
	}
}

func TestImagesAreValidAndRunAsNonRoot(t *testing.T) {
	base, err := baseImage(writeFile(t, "ca.crt", "CA BUNDLE\n"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	app, err := withBinary(base, "webserver", writeFile(t, "webserver", "BINARY"), map[string]string{"org.opencontainers.image.version": "dev"})
	if err != nil {
		t.Fatal(err)
	}
	for name, img := range map[string]v1.Image{"base": base, "webserver": app} {
		checkDiffIDs(t, name, img)
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != "65532:65532" || cfg.OS != "linux" || cfg.Architecture != "amd64" {
			t.Fatalf("%s image: user %q, platform %s/%s; want 65532:65532 on linux/amd64", name, cfg.Config.User, cfg.OS, cfg.Architecture)
		}
	}
	fs := files(t, app)
	if fs[caBundlePath] != "CA BUNDLE\n" || fs["webserver"] != "BINARY" {
		t.Fatalf("webserver image lacks the CA bundle or the binary: %v", fs)
	}
	if !strings.Contains(fs["etc/passwd"], "nonroot:x:65532:65532:") {
		t.Fatalf("/etc/passwd has no nonroot user: %q", fs["etc/passwd"])
	}
	cfg, _ := app.ConfigFile()
	if strings.Join(cfg.Config.Entrypoint, " ") != "/webserver" {
		t.Fatalf("entrypoint %v, want [/webserver]", cfg.Config.Entrypoint)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != "dev" {
		t.Fatalf("labels %v, want org.opencontainers.image.version=dev", cfg.Config.Labels)
	}
}

// The same inputs give the same digest, so pushing again on every make up
// uploads nothing new.
func TestImagesAreReproducible(t *testing.T) {
	ca := writeFile(t, "ca.crt", "CA")
	a, err := baseImage(ca, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	b, err := baseImage(ca, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("two builds of the base image differ: %s, %s", da, db)
	}
}
