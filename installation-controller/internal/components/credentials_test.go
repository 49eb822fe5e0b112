package components

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// authProxy fronts the registry and lets through only requests with the
// basic credentials user:secret, as a private registry does.
func authProxy(t *testing.T, registryHost string) string {
	t.Helper()
	target, err := url.Parse("http://" + registryHost)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:secret"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func dockerConfig(host, user, password string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return []byte(`{"auths":{"` + host + `":{"auth":"` + auth + `"}}}`)
}

func TestPullSecretsAreTheRegistryCredentials(t *testing.T) {
	e := newEnv(t)
	e.push(t, component{name: "acme.org/private", version: "1.0.0"})
	private := authProxy(t, e.host)
	req := e.ref("acme.org/private", "1.0.0")
	req.Definition.Reference.RepositoryContext = &lsv1alpha1.RepositoryContext{Type: "OCIRegistry", BaseURL: private + "/ocm"}
	r := e.resolver(t, Options{})
	ctx := context.Background()

	_, err := r.Resolve(ctx, req)
	wantErr(t, err, "acme.org/private:1.0.0", "registry "+private, "refused the credentials or needs some")

	req.PullSecrets = map[string][]byte{"wrong": dockerConfig(private, "user", "guess")}
	_, err = r.Resolve(ctx, req)
	wantErr(t, err, "registry "+private, "refused the credentials")

	// Secrets are merged by name: "z-right" comes after "wrong" and wins.
	req.PullSecrets["z-right"] = dockerConfig(private, "user", "secret")
	if _, err := r.Resolve(ctx, req); err != nil {
		t.Fatalf("with the right pull secret: %v", err)
	}
}

func TestRegistryDownIsNamed(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	host := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	e := newEnv(t)
	req := e.ref("acme.org/app", "1.0.0")
	req.Definition.Reference.RepositoryContext = &lsv1alpha1.RepositoryContext{Type: "OCIRegistry", BaseURL: host}
	_, err := e.resolver(t, Options{}).Resolve(context.Background(), req)
	wantErr(t, err, "acme.org/app:1.0.0", "registry "+host)
}
