// Command build-images builds the project's container images without Docker
// and pushes them to an OCI registry: a base image (CA certificates, a
// non-root user, /tmp) and, on top of it, one image per static binary given
// with --image NAME=PATH, whose entrypoint is /NAME.
//
//	build-images --registry 127.0.0.1:22381 --repository terrace --tag v1 \
//	  --image pause=bin/images/pause --image webserver=bin/images/webserver
//
// It prints one line per image pushed: NAME REFERENCE@DIGEST.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

type imageFlags map[string]string

func (f imageFlags) String() string { return fmt.Sprint(map[string]string(f)) }

func (f imageFlags) Set(v string) error {
	n, p, ok := strings.Cut(v, "=")
	if !ok || n == "" || p == "" || strings.ContainsAny(n, "/:@") {
		return fmt.Errorf("want NAME=PATH with a plain NAME, got %q", v)
	}
	f[n] = p
	return nil
}

func main() {
	registry := flag.String("registry", "127.0.0.1:22381", "registry host:port to push to (plain HTTP is allowed)")
	repository := flag.String("repository", "terrace", "repository prefix inside the registry")
	tag := flag.String("tag", "v1", "tag of every image")
	caBundle := flag.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates to put into the base image")
	images := imageFlags{}
	flag.Var(images, "image", "NAME=PATH: an image NAME with the static binary PATH as its entrypoint /NAME (repeatable)")
	labels := labelFlags{}
	flag.Var(labels, "label", "KEY=VALUE: a label of every image but the base (repeatable), e.g. org.opencontainers.image.version")
	flag.Parse()
	if err := run(*registry, *repository, *tag, *caBundle, images, labels); err != nil {
		log.Fatal(err)
	}
}

// labelFlags are the -label KEY=VALUE pairs.
type labelFlags map[string]string

func (f labelFlags) String() string { return fmt.Sprint(map[string]string(f)) }

func (f labelFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	f[k] = val
	return nil
}

func run(registry, repository, tag, caBundle string, images imageFlags, labels labelFlags) error {
	base, err := baseImage(caBundle, runtime.GOARCH)
	if err != nil {
		return err
	}
	if err := push(fmt.Sprintf("%s/%s/base:%s", registry, repository, tag), "base", base); err != nil {
		return err
	}
	for n, p := range images {
		img, err := withBinary(base, n, p, labels)
		if err != nil {
			return fmt.Errorf("image %s: %w", n, err)
		}
		if err := push(fmt.Sprintf("%s/%s/%s:%s", registry, repository, n, tag), n, img); err != nil {
			return err
		}
	}
	return nil
}

func push(ref, label string, img v1.Image) error {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(r, img); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(os.Stdout, "%s %s@%s\n", label, ref, digest)
	return err
}
