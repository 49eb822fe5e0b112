package helm

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// TestDownloadTrustsCustomCA: a server with a certificate of its own CA is
// refused as a configuration problem until the Context's customCAData
// holds that CA; the Authorization header goes along.
func TestDownloadTrustsCustomCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("archive"))
	}))
	t.Cleanup(srv.Close)
	cs, err := newChartSource(ChartSourceOptions{AllowLoopback: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL + "/a.tgz")
	ctx := context.Background()

	_, err = cs.download(ctx, "f", u, &repoAuth{}, 100, "max-chart-bytes")
	if err == nil || !lib.IsPermanent(err) || !strings.Contains(err.Error(), "the server's certificate is not trusted") {
		t.Fatalf("without the CA: %v", err)
	}
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	creds := &itemCredentials{context: "ns/c", repoAuths: []helmv1alpha1.Auth{{URL: srv.URL, AuthHeader: "Bearer t", CustomCAData: ca}}}
	a, err := creds.repoAuthFor(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	data, err := cs.download(ctx, "f", u, a, 100, "max-chart-bytes")
	if err != nil || string(data) != "archive" {
		t.Fatalf("with the CA: %q, %v", data, err)
	}
}
