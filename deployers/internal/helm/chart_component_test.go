package helm_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/helm"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/kit/ocm"
	"github.com/terrace-dev/terrace/kit/registrytest"
)

const (
	chartComponent   = "acme.org/charts"
	chartMediaType   = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	componentVersion = "1.0.0"
)

// chartComponentVersion pushes acme.org/charts:1.0.0 to a fresh registry:
// resource "blob-chart" is archive as a local blob, "oci-chart" the OCI
// chart at ociRef, "image" a local blob that is no chart and "huge" a
// chart blob larger than --max-chart-bytes. It returns the repository
// context and the pushed descriptor.
func chartComponentVersion(t *testing.T, archive []byte, ociRef string) (*lsv1alpha1.RepositoryContext, *ocm.ComponentDescriptor) {
	t.Helper()
	notChart := []byte("an image layer")
	huge := bytes.Repeat([]byte{'x'}, 11<<20)
	return pushChartComponent(t, registrytest.Start(t)+"/components", []ocm.Resource{
		blobResource("blob-chart", chartMediaType, archive),
		blobResource("image", "application/vnd.oci.image.layer.v1.tar", notChart),
		blobResource("huge", chartMediaType, huge),
		{ElementMeta: ocm.ElementMeta{Name: "oci-chart", Version: "0.1.0"}, Type: "helmChart", Relation: ocm.RelationExternal,
			Access: ocm.NewOCIArtifactAccess(ociRef)},
	}, ocm.BytesBlob(chartMediaType, archive), ocm.BytesBlob("application/vnd.oci.image.layer.v1.tar", notChart), ocm.BytesBlob(chartMediaType, huge))
}

// blobResource is a resource of data as a local blob.
func blobResource(name, mediaType string, data []byte) ocm.Resource {
	return ocm.Resource{
		ElementMeta: ocm.ElementMeta{Name: name, Version: componentVersion}, Type: "helmChart", Relation: ocm.RelationLocal,
		Access: ocm.NewLocalBlobAccess(ocm.LocalBlobAccess{LocalReference: digest.FromBytes(data).String(), MediaType: mediaType}),
	}
}

// pushChartComponent pushes acme.org/charts:1.0.0 with resources to the
// OCM repository at base and returns its repository context and the
// pushed descriptor.
func pushChartComponent(t *testing.T, base string, resources []ocm.Resource, blobs ...ocm.LocalBlob) (*lsv1alpha1.RepositoryContext, *ocm.ComponentDescriptor) {
	t.Helper()
	cd := &ocm.ComponentDescriptor{Meta: ocm.Meta{SchemaVersion: ocm.SchemaVersionV2}, Component: ocm.Component{
		Name: chartComponent, Version: componentVersion, Provider: ocm.Provider{Name: "acme.org"}, Resources: resources,
	}}
	repo := &ocm.Repository{Base: base, PlainHTTP: true}
	if _, err := ocm.Push(context.Background(), repo, cd, blobs); err != nil {
		t.Fatalf("pushing the component version: %v", err)
	}
	pushed, err := ocm.Resolve(context.Background(), repo, chartComponent, componentVersion)
	if err != nil {
		t.Fatal(err)
	}
	return &lsv1alpha1.RepositoryContext{Type: "OCIRegistry", BaseURL: base}, pushed
}

func resourceKey(t *testing.T, rc *lsv1alpha1.RepositoryContext, name, version, resource string) string {
	t.Helper()
	key, err := ocm.EncodeResourceKey(ocm.ResourceKey{RepositoryContext: rc, ComponentName: name, Version: version,
		Resource: ocm.ResourceIdentity{Name: resource}})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func fromResourceRef(rc *lsv1alpha1.RepositoryContext, resource string) map[string]any {
	return map[string]any{"fromResource": map[string]any{
		"ref":          map[string]any{"repositoryContext": rc, "componentName": chartComponent, "version": componentVersion},
		"resourceName": resource,
	}}
}

// TestChartsFromComponentVersions installs charts that are resources of a
// component version: a local blob and an OCI artifact, named by a resource
// key, by fromResource.ref and by an inline descriptor.
func TestChartsFromComponentVersions(t *testing.T) {
	ns := testutil.Namespace(t, env)
	target(NewWithT(t), ns)
	ociRef := pushArchive(t, versionedChart(t, "0.1.0", "from-oci"))
	rc, cd := chartComponentVersion(t, versionedChart(t, "0.2.0", "from-blob"), ociRef)
	inline, err := ocm.EncodeV2JSON(cd)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, greeting string
		chart          map[string]any
	}{
		{"key-blob", "from-blob", map[string]any{"resourceRef": resourceKey(t, rc, chartComponent, componentVersion, "blob-chart")}},
		{"key-oci", "from-oci", map[string]any{"resourceRef": resourceKey(t, rc, chartComponent, componentVersion, "oci-chart")}},
		{"ref-blob", "from-blob", fromResourceRef(rc, "blob-chart")},
		{"ref-oci", "from-oci", fromResourceRef(rc, "oci-chart")},
		{"inline-blob", "from-blob", map[string]any{"fromResource": map[string]any{"inline": lsv1alpha1.NewAnyJSON(inline), "resourceName": "blob-chart"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			di := createItem(g, ns, tc.name, providerConfig(map[string]any{"chart": tc.chart, "name": tc.name, "namespace": ns}))
			g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
			g.Expect(greeting(g, ns, tc.name+"-cm")()).To(Equal(tc.greeting))
		})
	}
}

// TestChartFromComponentBadInput: each unusable component reference fails
// the item, naming the field and what is wrong.
func TestChartFromComponentBadInput(t *testing.T) {
	ns := testutil.Namespace(t, env)
	target(NewWithT(t), ns)
	rc, _ := chartComponentVersion(t, versionedChart(t, "0.3.0", "bad"), "127.0.0.1:1/charts/none:0.1.0")
	cases := []struct {
		name, reason, msg string
		chart             map[string]any
	}{
		{"malformed-key", helm.ReasonComponentResource, "spec.config.chart.resourceRef: the resource key does not hold a resource identity",
			map[string]any{"resourceRef": "bm90IGpzb24"}},
		{"unknown-version", helm.ReasonComponentResource, "spec.config.chart.resourceRef (component version acme.org/charts:9.9.9): component version acme.org/charts:9.9.9",
			map[string]any{"resourceRef": resourceKey(t, rc, chartComponent, "9.9.9", "blob-chart")}},
		{"no-such-resource", helm.ReasonComponentResource, `spec.config.chart.fromResource (component version acme.org/charts:1.0.0): resource "nope"`,
			fromResourceRef(rc, "nope")},
		{"not-a-chart", helm.ReasonInvalidChart, `resource "image": media type "application/vnd.oci.image.layer.v1.tar" is not a chart archive`,
			map[string]any{"resourceRef": resourceKey(t, rc, chartComponent, componentVersion, "image")}},
		{"too-large", helm.ReasonInvalidChart, `resource "huge": the chart archive is larger than 10Mi (--max-chart-bytes)`,
			fromResourceRef(rc, "huge")},
		{"no-source", helm.ReasonComponentResource, "spec.config.chart.fromResource: one of ref or inline must be set",
			map[string]any{"fromResource": map[string]any{"resourceName": "blob-chart"}}},
		{"inline-not-a-descriptor", helm.ReasonComponentResource, "spec.config.chart.fromResource.inline: component descriptor",
			map[string]any{"fromResource": map[string]any{"inline": map[string]string{"kind": "nothing"}, "resourceName": "blob-chart"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			di := createItem(g, ns, tc.name, providerConfig(map[string]any{"chart": tc.chart, "name": tc.name, "namespace": ns}))
			g.Eventually(get(g, di), timeout, interval).Should(failedWith(tc.reason, tc.msg))
		})
	}
}

// TestChartFromComponentRegistryDown: a component repository that does
// not answer is retried, not a configuration problem.
func TestChartFromComponentRegistryDown(t *testing.T) {
	g := NewWithT(t)
	ns := testutil.Namespace(t, env)
	target(g, ns)
	down := httptest.NewServer(nil)
	down.Close()
	rc := &lsv1alpha1.RepositoryContext{Type: "OCIRegistry", BaseURL: strings.TrimPrefix(down.URL, "http://") + "/components"}
	di := createItem(g, ns, "down", providerConfig(map[string]any{
		"chart": map[string]any{"resourceRef": resourceKey(t, rc, chartComponent, componentVersion, "blob-chart")}, "name": "down", "namespace": ns,
	}))
	g.Eventually(get(g, di), timeout, interval).Should(notFailedRetrying(helm.ReasonChartPullFailed, "connection refused"))
}

// TestChartFromComponentContextRepository: a fromResource.ref without
// repositoryContext is read from the repositoryContext of the item's
// Context, a named one or the namespace's default; without either the item
// fails naming both places.
func TestChartFromComponentContextRepository(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	archive := versionedChart(t, "0.1.0", "from-context")
	rc, _ := pushChartComponent(t, registrytest.Start(t)+"/components", []ocm.Resource{blobResource("blob-chart", chartMediaType, archive)},
		ocm.BytesBlob(chartMediaType, archive))
	elsewhere := &lsv1alpha1.RepositoryContext{Type: "OCIRegistry", BaseURL: "127.0.0.1:1/nothing"}
	chart := map[string]any{"fromResource": map[string]any{
		"ref": map[string]any{"componentName": chartComponent, "version": componentVersion}, "resourceName": "blob-chart",
	}}
	withDefault, named, none := testutil.Namespace(t, env), testutil.Namespace(t, env), testutil.Namespace(t, env)
	for _, ns := range []string{withDefault, named, none} {
		target(g, ns)
	}
	for _, c := range []*lsv1alpha1.Context{
		{ObjectMeta: metav1.ObjectMeta{Name: lsv1alpha1.DefaultContextName, Namespace: withDefault}, RepositoryContext: rc},
		{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: named}, RepositoryContext: rc},
		{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: named}, RepositoryContext: elsewhere},
		{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: named}},
	} {
		g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	}
	cases := []struct {
		name, ns, lsContext string
		chart               map[string]any
		msg                 string // empty: succeeds
	}{
		{name: "default", ns: withDefault, chart: chart},
		{name: "named", ns: named, lsContext: "repo", chart: chart},
		{name: "own-wins", ns: named, lsContext: "elsewhere", chart: fromResourceRef(rc, "blob-chart")},
		{name: "bare", ns: named, lsContext: "bare", chart: chart,
			msg: "spec.config.chart.fromResource.ref.repositoryContext is not set and the item's Context " + named + "/bare has no repositoryContext"},
		{name: "none", ns: none, chart: chart,
			msg: "spec.config.chart.fromResource.ref.repositoryContext is not set and the item has no Context to take it from (spec.context is empty or \"default\", and " + none + " has no Context \"default\")"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			di := createItemIn(g, tc.ns, tc.name, tc.lsContext, providerConfig(map[string]any{"chart": tc.chart, "name": tc.name, "namespace": tc.ns}))
			if tc.msg != "" {
				g.Eventually(get(g, di), timeout, interval).Should(failedWith(helm.ReasonComponentResource, tc.msg))
				return
			}
			g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
			g.Expect(greeting(g, tc.ns, tc.name+"-cm")()).To(Equal("from-context"))
		})
	}
}
