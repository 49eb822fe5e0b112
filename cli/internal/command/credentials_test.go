package command

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrace-dev/terrace/kit/registrytest"
)

// basicAuthRegistry fronts an in-process registry with basic auth
// user:secret; it returns the front's host:port.
func basicAuthRegistry(t *testing.T) string {
	t.Helper()
	target, _ := url.Parse("http://" + registrytest.Start(t))
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "secret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestRegistryConfigCredentials(t *testing.T) {
	host := basicAuthRegistry(t)
	dir := t.TempDir()
	constructor := filepath.Join(dir, "c.yaml")
	write(t, constructor, "name: acme.org/a\nversion: 1.0.0\nprovider: acme\n")

	_, errOut, code := run(t, "component", "push", "--repo", host+"/ocm", "--plain-http", constructor)
	if code == 0 || !strings.Contains(errOut, "refused the credentials or needs some") || !strings.Contains(errOut, host) {
		t.Fatalf("without credentials: exit %d, error %q", code, errOut)
	}

	config := filepath.Join(dir, "config.json")
	write(t, config, fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, base64.StdEncoding.EncodeToString([]byte("user:secret"))))
	if _, errOut, code := run(t, "component", "push", "--registry-config", config, "--repo", host+"/ocm", "--plain-http", constructor); code != 0 {
		t.Fatalf("with --registry-config: %s", errOut)
	}
	// The default config is $DOCKER_CONFIG/config.json.
	t.Setenv("DOCKER_CONFIG", dir)
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"component", "get", "--plain-http", host + "/ocm//acme.org/a:1.0.0"}, &stdout, &stderr); code != 0 {
		t.Fatalf("with the default config: %s", stderr.String())
	}
}
