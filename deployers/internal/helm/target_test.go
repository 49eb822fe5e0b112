package helm

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestTargetClientsShareOneConnection: Helm builds new clients from the
// getter's config for every operation; with a dialer of its own (the
// Target guard's) each would otherwise open, and keep, its own connection.
// The credentials still go with every request.
func TestTargetClientsShareOneConnection(t *testing.T) {
	var conns, unauthenticated atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer token" {
			unauthenticated.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()

	dialer := &net.Dialer{}
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, BearerToken: "token"}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, addr)
	}
	g, err := newTargetGetter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const operations = 5
	for range operations {
		rc, err := g.ToRESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.CoreV1().Secrets("ns").Get(context.Background(), "s", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("get: %v, want NotFound", err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d operations opened %d connections, want 1", operations, n)
	}
	if n := unauthenticated.Load(); n > 0 {
		t.Errorf("%d requests came without the config's credentials", n)
	}
}
