package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// render templates the chart as helm template would, with the target's
// Kubernetes version and API versions as capabilities, and returns its
// objects (CRDs of crds/ included; hooks are not rendered into objects).
// Namespaced objects without a namespace go into the release namespace.
func render(g *targetGetter, mapper meta.RESTMapper, cfg *config, ch *chart.Chart, log logr.Logger) ([]manifest.SetObject, error) {
	i := action.NewInstall(&action.Configuration{Log: func(format string, v ...any) { log.V(1).Info(fmt.Sprintf(format, v...)) }})
	i.ReleaseName, i.Namespace = cfg.spec.Name, cfg.spec.Namespace
	i.DryRun, i.ClientOnly, i.IncludeCRDs, i.Replace = true, true, true, true
	i.SkipSchemaValidation = cfg.ops.install.SkipSchemaValidation
	caps, err := g.capabilities()
	if err != nil {
		return nil, err
	}
	i.KubeVersion, i.APIVersions = &caps.KubeVersion, caps.APIVersions
	rel, err := i.RunWithContext(context.Background(), ch, cfg.values)
	if err != nil {
		return nil, releaseError("template", cfg, err)
	}
	objs, err := manifestObjects(rel.Manifest, rel.Namespace, mapper)
	if err != nil {
		return nil, err
	}
	if cfg.spec.CreateNamespace {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(cfg.spec.Namespace)
		// Kept on deletion, as helm uninstall keeps a namespace it created.
		objs = append(objs, manifest.SetObject{Field: "spec.config.createNamespace", Policy: manifestv1alpha2.KeepPolicy, Object: ns})
	}
	return objs, nil
}

// manifestObjects parses a release manifest into its objects, named by
// their template for messages.
func manifestObjects(manifestText, namespace string, mapper meta.RESTMapper) ([]manifest.SetObject, error) {
	docs := releaseutil.SplitManifests(manifestText)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var out []manifest.SetObject
	for _, k := range keys {
		field := "chart " + templateOf(docs[k])
		var m map[string]any
		if err := yaml.Unmarshal([]byte(docs[k]), &m); err != nil {
			return nil, lib.ConfigError(ReasonRenderFailed, "%s: not a Kubernetes object: %v", field, err)
		}
		if len(m) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: m}
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
			return nil, lib.ConfigError(ReasonRenderFailed, "%s: an object without apiVersion or kind", field)
		}
		if obj.GetNamespace() == "" && namespaced(mapper, obj.GetAPIVersion(), obj.GetKind()) {
			obj.SetNamespace(namespace)
		}
		out = append(out, manifest.SetObject{Field: field, Policy: policyOf(obj), Object: obj})
	}
	return out, nil
}

// policyOf keeps an object Helm would keep on uninstall (annotation
// helm.sh/resource-policy: keep): applied and updated, never deleted.
func policyOf(obj *unstructured.Unstructured) manifestv1alpha2.ManifestPolicy {
	if obj.GetAnnotations()["helm.sh/resource-policy"] == "keep" {
		return manifestv1alpha2.KeepPolicy
	}
	return manifestv1alpha2.ManagePolicy
}

// templateOf is the template a rendered document came from ("# Source: ...").
func templateOf(doc string) string {
	for line := range strings.SplitSeq(doc, "\n") {
		if src, ok := strings.CutPrefix(strings.TrimSpace(line), "# Source: "); ok {
			return src
		}
	}
	return "template"
}

// objectsOf are the objects of the set, for readiness checks.
func objectsOf(set []manifest.SetObject) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(set))
	for _, o := range set {
		out = append(out, o.Object)
	}
	return out
}

// helmStatus records the managed objects as the helm ProviderStatus.
func helmStatus(managed []manifestv1alpha2.ManagedResourceStatus) ([]byte, error) {
	ps := helmv1alpha1.ProviderStatus{}
	ps.APIVersion, ps.Kind = helmv1alpha1.SchemeGroupVersion.String(), "ProviderStatus"
	for _, m := range managed {
		ps.ManagedResources = append(ps.ManagedResources, helmv1alpha1.ManagedResourceStatus{
			Policy: string(m.Policy), Resource: helmv1alpha1.ObjectReference{
				APIVersion: m.Resource.APIVersion, Kind: m.Resource.Kind, Name: m.Resource.Name, Namespace: m.Resource.Namespace,
			},
		})
	}
	return json.Marshal(ps)
}

// objectClients keeps a controller-runtime client per target connection,
// for the manifest deployer's machinery. Its REST mapper learns kinds the
// target starts serving (a chart's CRDs), which Helm's cached discovery
// does not.
type objectClients struct {
	mu      sync.Mutex
	clients map[*targetGetter]client.Client
}

var targetObjectClients objectClients

// applier is the manifest deployer's machinery on g's cluster.
func (d *deployer) applier(g *targetGetter) (*manifest.Applier, error) {
	c, err := targetObjectClients.forGetter(g)
	if err != nil {
		return nil, err
	}
	return &manifest.Applier{Host: d.client, FieldOwner: d.fieldOwner, Target: c, Mapper: c.RESTMapper()}, nil
}

func (oc *objectClients) forGetter(g *targetGetter) (client.Client, error) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if c, ok := oc.clients[g]; ok {
		return c, nil
	}
	hc, err := rest.HTTPClientFor(g.cfg)
	if err != nil {
		return nil, lib.TransientError(ReasonUnreachable, fmt.Errorf("connecting to the target cluster: %w", err))
	}
	mapper, err := apiutil.NewDynamicRESTMapper(g.cfg, hc)
	if err != nil {
		return nil, lib.TransientError(ReasonUnreachable, fmt.Errorf("connecting to the target cluster: %w", err))
	}
	c, err := client.New(g.cfg, client.Options{HTTPClient: hc, Mapper: mapper})
	if err != nil {
		return nil, lib.TransientError(ReasonUnreachable, fmt.Errorf("connecting to the target cluster: %w", err))
	}
	if oc.clients == nil || len(oc.clients) >= maxTargetClients {
		oc.clients = map[*targetGetter]client.Client{}
	}
	oc.clients[g] = c
	return c, nil
}
