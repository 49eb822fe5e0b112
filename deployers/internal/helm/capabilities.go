package helm

import (
	"fmt"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"

	"github.com/terrace-dev/terrace/deployers/lib"
)

// serverVersionTTL is how long a target's Kubernetes version is reused: it
// changes only with an upgrade of the target's API server.
const serverVersionTTL = 10 * time.Minute

// serverVersion caches a target's Kubernetes version.
type serverVersion struct {
	mu   sync.Mutex
	v    *version.Info
	read time.Time
}

func (s *serverVersion) get(dc discovery.DiscoveryInterface) (*version.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.v != nil && time.Since(s.read) < serverVersionTTL {
		return s.v, nil
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return nil, err
	}
	s.v, s.read = v, time.Now()
	return v, nil
}

// capabilities are what a chart's templates see of the target
// (.Capabilities): its Kubernetes version and API versions, from the
// getter's discovery cache. Helm would otherwise invalidate that cache and
// read discovery and OpenAPI again for every release; the cache is
// refreshed when Helm installs CRDs and when the mapper misses a kind.
func (g *targetGetter) capabilities() (*chartutil.Capabilities, error) {
	sv, err := g.version.get(g.discovery)
	if err != nil {
		return nil, lib.TransientError(ReasonUnreachable, fmt.Errorf("reading the target's Kubernetes version: %w", err))
	}
	apiVersions, err := action.GetVersionSet(g.discovery)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, lib.TransientError(ReasonUnreachable, fmt.Errorf("reading the target's API versions: %w", err))
	}
	return &chartutil.Capabilities{
		APIVersions: apiVersions,
		KubeVersion: chartutil.KubeVersion{Version: sv.GitVersion, Major: sv.Major, Minor: sv.Minor},
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
	}, nil
}
