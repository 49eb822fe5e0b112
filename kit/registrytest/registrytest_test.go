package registrytest_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/terrace-dev/terrace/kit/registrytest"
	"github.com/terrace-dev/terrace/kit/registrytest/ocicheck"
)

func TestChartArtifactPushedComesBackByDigest(t *testing.T) {
	host := registrytest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	chart := []byte("a chart archive's bytes")
	pushed, err := ocicheck.PushChart(ctx, host+"/charts/demo", "0.1.0", []byte(`{"name":"demo","version":"0.1.0"}`), chart)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	resolved, err := ocicheck.ResolveTag(ctx, pushed)
	if err != nil {
		t.Fatalf("resolving the tag: %v", err)
	}
	if resolved != pushed.Digest {
		t.Fatalf("tag %s resolves to %s, want the pushed manifest %s", pushed.Tag, resolved, pushed.Digest)
	}
	got, err := ocicheck.PullChart(ctx, pushed)
	if err != nil {
		t.Fatalf("pull by digest: %v", err)
	}
	if !bytes.Equal(got, chart) {
		t.Fatalf("pulled chart content %q, want %q", got, chart)
	}
}

func TestImagePushedComesBackByDigest(t *testing.T) {
	host := registrytest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pushed, err := ocicheck.PushImage(ctx, host+"/images/demo", "v1", "etc/motd", []byte("hello"))
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	got, err := ocicheck.PullImage(ctx, pushed, "etc/motd")
	if err != nil {
		t.Fatalf("pull by digest: %v", err)
	}
	if string(got) != "hello" {
		t.Fatalf("pulled etc/motd %q, want %q", got, "hello")
	}
}

func TestRegistriesAreIsolatedAndStopWithTheTest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := registrytest.New()
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := ocicheck.PushImage(ctx, first.Host+"/images/demo", "v1", "etc/motd", []byte("hello"))
	if err != nil {
		t.Fatalf("push: %v", err)
	}

	// A second registry starts empty: what one test pushes, another does not see.
	second := registrytest.Start(t)
	elsewhere := ocicheck.Pushed{Repository: second + "/images/demo", Tag: "v1", Digest: pushed.Digest}
	if _, err := ocicheck.PullImage(ctx, elsewhere, "etc/motd"); err == nil {
		t.Fatalf("a fresh registry served %s, pushed only to another one", pushed.Digest)
	}

	first.Close()
	resp, err := http.Get("http://" + first.Host + "/v2/")
	if err == nil {
		_ = resp.Body.Close()
		t.Fatalf("a closed registry still answers on %s: %s", first.Host, resp.Status)
	}
}
