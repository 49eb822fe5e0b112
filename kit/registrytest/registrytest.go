// Package registrytest runs a real OCI registry in-process for tests: the CNCF
// distribution registry's own HTTP handlers over its in-memory storage driver,
// served by an httptest server on loopback in plain HTTP. Clients reach it by
// the host:port Start returns, as they would a registry in a cluster.
//
// Only tests import this package: it links the registry into the binary that
// imports it. kit pins the registry one patch release below the local
// environment's (hack/tools/registry): the newer one would raise dependency
// versions every binary's module selects through kit.
package registrytest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	// The storage driver the registry keeps blobs and manifests in.
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"github.com/sirupsen/logrus"
)

// Registry is a running in-process registry.
type Registry struct {
	// Host is the registry's host:port on loopback (plain HTTP), the prefix of
	// every reference into it: Host + "/repo:tag".
	Host string

	server *httptest.Server
	app    *handlers.App
}

// Start starts a registry and stops it when the test ends; it returns the
// registry's host:port.
func Start(tb testing.TB) string {
	tb.Helper()
	r, err := New()
	if err != nil {
		tb.Fatalf("starting the in-process OCI registry: %v", err)
	}
	tb.Cleanup(r.Close)
	return r.Host
}

// New starts a registry with empty storage. Close stops it and drops its
// content.
func New() (*Registry, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("generating the registry's upload secret: %w", err)
	}
	config := &configuration.Configuration{
		Storage: configuration.Storage{
			"inmemory": configuration.Parameters{},
			"delete":   configuration.Parameters{"enabled": true},
			// Nothing to purge in a registry that lives as long as a test.
			"maintenance": configuration.Parameters{
				"uploadpurging": map[any]any{"enabled": false},
			},
		},
	}
	config.HTTP.Secret = hex.EncodeToString(secret)
	// The registry logs every request at info level through logrus's
	// standard logger; a test needs only its warnings and errors.
	logrus.SetLevel(logrus.WarnLevel)

	app, err := newApp(config)
	if err != nil {
		return nil, err
	}
	server := httptest.NewServer(app)
	return &Registry{
		Host:   strings.TrimPrefix(server.URL, "http://"),
		server: server,
		app:    app,
	}, nil
}

// newApp builds the registry's handler; it panics on a bad configuration,
// which New reports as an error instead.
func newApp(config *configuration.Configuration) (app *handlers.App, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("configuring the in-process OCI registry: %v", r)
		}
	}()
	return handlers.NewApp(context.Background(), config), nil
}

// Close stops the registry: it refuses new connections and its content is
// gone.
func (r *Registry) Close() {
	r.server.Close()
	_ = r.app.Shutdown()
}
