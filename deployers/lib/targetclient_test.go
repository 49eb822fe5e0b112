package lib

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// endless is a body that never ends, counting what was read from it.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	e.read += int64(len(p))
	return len(p), nil
}

func (e *endless) Close() error { return nil }

// A body larger than the cap is read no further than the cap (plus the one
// byte that tells it is larger): what a reader of the body holds is bounded
// by the cap, whatever the target sends.
func TestCappedBodyStopsAtTheCap(t *testing.T) {
	src := &endless{}
	rt := &cappedTransport{limit: 1000, next: roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: src, ContentLength: -1}, nil
	})}
	resp, err := rt.RoundTrip(&http.Request{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	var tooLarge *ResponseTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Limit != 1000 || !strings.Contains(err.Error(), "--target-max-response-bytes") {
		t.Fatalf("ReadAll error = %v, want a ResponseTooLargeError of 1000 naming the flag", err)
	}
	if len(got) > 1000 || src.read > 1001 {
		t.Errorf("read %d bytes of the body (%d from the source), want at most the cap", len(got), src.read)
	}

	// A body of exactly the cap is read whole.
	rt.next = roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(strings.Repeat("x", 1000))), ContentLength: -1}, nil
	})
	resp, err = rt.RoundTrip(&http.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(resp.Body); err != nil || len(got) != 1000 {
		t.Errorf("a body of the cap: %d bytes, %v", len(got), err)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Loopback and unspecified addresses are refused unless allowed; the
// deployer's own listen addresses always.
func TestRefusedAddresses(t *testing.T) {
	own := []string{":8080", "127.0.0.1:8081", "0"}
	cases := []struct {
		ip, port      string
		allowLoopback bool
		refused       string
	}{
		{"127.0.0.1", "6443", false, "--allow-loopback-targets"},
		{"127.0.0.2", "6443", false, "--allow-loopback-targets"},
		{"::1", "6443", false, "--allow-loopback-targets"},
		{"0.0.0.0", "6443", false, "--allow-loopback-targets"},
		{"127.0.0.1", "6443", true, ""},
		{"127.0.0.1", "8080", true, "own listen address :8080"},
		{"::1", "8080", true, "own listen address :8080"},
		{"127.0.0.1", "8081", true, "own listen address 127.0.0.1:8081"},
		{"192.0.2.10", "8080", false, ""},
		{"192.0.2.10", "443", false, ""},
	}
	for _, c := range cases {
		o := TargetClientOptions{AllowLoopback: c.allowLoopback, OwnListenAddresses: own}
		got := o.refused(net.ParseIP(c.ip), c.port)
		if (c.refused == "") != (got == "") || !strings.Contains(got, c.refused) {
			t.Errorf("refused(%s:%s, allowLoopback=%v) = %q, want %q", c.ip, c.port, c.allowLoopback, got, c.refused)
		}
	}
}

// Guard resolves the name: localhost is a loopback address like 127.0.0.1.
func TestGuardResolvesTheServerName(t *testing.T) {
	for _, host := range []string{"https://localhost:6443", "https://127.0.0.1", "localhost:6443"} {
		err := TargetClientOptions{}.Guard(context.Background(), &rest.Config{Host: host})
		var refused *AddressRefusedError
		if !errors.As(err, &refused) {
			t.Errorf("Guard(%s) = %v, want an AddressRefusedError", host, err)
		}
	}
	cfg := &rest.Config{Host: "https://localhost:6443"}
	if err := (TargetClientOptions{AllowLoopback: true}).Guard(context.Background(), cfg); err != nil {
		t.Fatalf("Guard with loopback allowed: %v", err)
	}
	if cfg.Timeout != DefaultTargetRequestTimeout || cfg.Dial == nil || cfg.WrapTransport == nil {
		t.Errorf("Guard left the config unbounded: timeout %s, dial set %v, wrap set %v", cfg.Timeout, cfg.Dial != nil, cfg.WrapTransport != nil)
	}
}
