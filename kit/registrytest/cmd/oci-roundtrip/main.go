// Command oci-roundtrip checks an OCI registry with a standard client
// (oras-go): it pushes an artifact shaped as `helm push` shapes a chart and a
// container image, pulls both back by digest and checks that they are what
// was pushed. It prints both as <repository>:<tag>@<digest>; a later run with
// -pull-chart and -pull-image checks that the registry still serves them
// (after a restart, say).
//
//	oci-roundtrip -registry 127.0.0.1:22381
//	oci-roundtrip -pull-chart <printed reference> -pull-image <printed reference>
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/terrace-dev/terrace/kit/registrytest/ocicheck"
)

// imageFile is the file the pushed image holds.
const imageFile = "etc/terrace-smoke"

func main() {
	registry := flag.String("registry", "", "the registry's host:port (plain HTTP); push, then pull back")
	pullChart := flag.String("pull-chart", "", "only pull this chart, <repository>:<tag>@<digest> as a push printed, and check it")
	pullImage := flag.String("pull-image", "", "only pull this image, <repository>:<tag>@<digest> as a push printed, and check it")
	timeout := flag.Duration("timeout", time.Minute, "how long the whole check may take")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var err error
	switch {
	case *pullChart != "" || *pullImage != "":
		err = pullOnly(ctx, *pullChart, *pullImage)
	case *registry != "":
		err = roundTrip(ctx, *registry)
	default:
		err = fmt.Errorf("give -registry, or -pull-chart and -pull-image")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "oci-roundtrip:", err)
		os.Exit(1)
	}
}

func roundTrip(ctx context.Context, registry string) error {
	// Fresh content each run: a pull can only pass by what this run pushed.
	stamp := []byte(time.Now().Format(time.RFC3339Nano))
	chart, err := ocicheck.PushChart(ctx, registry+"/terrace-smoke/chart", "0.1.0", []byte(`{"name":"chart","version":"0.1.0"}`), stamp)
	if err != nil {
		return err
	}
	image, err := ocicheck.PushImage(ctx, registry+"/terrace-smoke/image", "v1", imageFile, stamp)
	if err != nil {
		return err
	}
	for _, p := range []ocicheck.Pushed{chart, image} {
		got, err := ocicheck.ResolveTag(ctx, p)
		if err != nil {
			return err
		}
		if got != p.Digest {
			return fmt.Errorf("tag %s:%s resolves to %s, want the pushed manifest %s", p.Repository, p.Tag, got, p.Digest)
		}
	}
	if err := pull(ctx, chart, image, string(stamp)); err != nil {
		return err
	}
	fmt.Printf("chart %s\nimage %s\n", chart, image)
	return nil
}

// pull pulls the chart and the image by digest and checks that both hold
// want.
func pull(ctx context.Context, chart, image ocicheck.Pushed, want string) error {
	got, err := ocicheck.PullChart(ctx, chart)
	if err != nil {
		return err
	}
	if string(got) != want {
		return fmt.Errorf("chart %s holds %q, want %q", chart, got, want)
	}
	if got, err = ocicheck.PullImage(ctx, image, imageFile); err != nil {
		return err
	}
	if string(got) != want {
		return fmt.Errorf("image %s holds %q in %s, want %q", image, got, imageFile, want)
	}
	return nil
}

func pullOnly(ctx context.Context, chartRef, imageRef string) error {
	chart, err := parse(chartRef)
	if err != nil {
		return err
	}
	image, err := parse(imageRef)
	if err != nil {
		return err
	}
	// The image holds what the chart holds (roundTrip pushed one stamp to both).
	want, err := ocicheck.PullChart(ctx, chart)
	if err != nil {
		return err
	}
	if err := pull(ctx, chart, image, string(want)); err != nil {
		return err
	}
	fmt.Printf("chart %s and image %s pulled by digest\n", chart, image)
	return nil
}

// parse reads <repository>:<tag>@<digest>.
func parse(ref string) (ocicheck.Pushed, error) {
	named, dgst, ok := strings.Cut(ref, "@")
	i := strings.LastIndex(named, ":")
	if !ok || i < 0 || strings.Contains(named[i:], "/") {
		return ocicheck.Pushed{}, fmt.Errorf("%q: want <repository>:<tag>@<digest>", ref)
	}
	d, err := digest.Parse(dgst)
	if err != nil {
		return ocicheck.Pushed{}, fmt.Errorf("%q: %w", ref, err)
	}
	return ocicheck.Pushed{Repository: named[:i], Tag: named[i+1:], Digest: d}, nil
}
