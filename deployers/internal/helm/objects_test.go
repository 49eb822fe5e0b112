package helm_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/status"
)

// chartOf builds a chart "objs" of the given templates (files under
// crds/ are CRDs) as an inline archive.
func chartOf(t *testing.T, templates map[string]string) map[string]any {
	t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "objs", Version: "0.1.0"}, Values: map[string]any{}}
	for name, text := range templates {
		if strings.HasPrefix(name, "crds/") {
			ch.Files = append(ch.Files, &chart.File{Name: name, Data: []byte(text)})
			continue
		}
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/" + name, Data: []byte(text)})
	}
	path, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"archive": map[string]string{"raw": base64.StdEncoding.EncodeToString(data)}}
}

const greetingCM = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cm
data:
  greeting: {{ .Values.greeting | quote }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
`

const extraCM = `{{- if .Values.extra }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-extra
data:
  extra: "yes"
{{- end }}
`

func exportOf(g *WithT, di *lsv1alpha1.DeployItem) func() string {
	return func() string {
		s := &corev1.Secret{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: di.Namespace, Name: lib.ExportSecretName(di)}, s); err != nil {
			return ""
		}
		return string(s.Data["export"])
	}
}

func readyMessage(di *lsv1alpha1.DeployItem) string {
	if c := meta.FindStatusCondition(di.Status.Conditions, status.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// TestRenderedObjectsLifecycle: with helmDeployment: false the chart is
// rendered with the target's capabilities and its objects applied without
// a Helm release; objects that leave the chart are deleted, exports read
// the values and the objects, deleting the item deletes the objects (not
// those Helm keeps).
func TestRenderedObjectsLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	target(g, ns)
	kept := `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-kept
  annotations: {helm.sh/resource-policy: keep}
data: {greeting: kept}
`
	ch := chartOf(t, map[string]string{"cm.yaml": greetingCM, "extra.yaml": extraCM, "kept.yaml": kept})
	config := func(greet string, extra bool) []byte {
		return providerConfig(map[string]any{
			"chart": ch, "name": "plain", "namespace": ns, "helmDeployment": false,
			"values":               map[string]any{"greeting": greet, "extra": extra},
			"exportsFromManifests": []map[string]any{{"key": "fromValues", "jsonPath": ".Values.greeting"}},
			"exports": map[string]any{"exports": []map[string]any{{"key": "fromObject", "jsonPath": ".data.greeting",
				"fromResource": map[string]string{"apiVersion": "v1", "kind": "ConfigMap", "name": "plain-cm", "namespace": ns}}}},
		})
	}
	di := createItem(g, ns, "plain", config("hello", true))
	g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))

	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "plain-cm"}, cm)).To(Succeed(), "namespaced objects go into the release namespace")
	g.Expect(cm.Data["greeting"]).To(Equal("hello"))
	sv, err := discovery.NewDiscoveryClientForConfigOrDie(env.Config).ServerVersion()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.Data["kube"]).To(Equal(sv.GitVersion), "rendered with the target's Kubernetes version")
	g.Expect(cm.Annotations).To(HaveKeyWithValue(manifest.ManagedByAnnotation, ns+"/plain"))
	g.Expect(greeting(g, ns, "plain-extra")()).To(BeEmpty())
	g.Expect(secretExists(ns, "sh.helm.release.v1.plain.v1")).To(BeFalse(), "no Helm release")
	ps := string(get(g, di)().Status.ProviderStatus.Raw)
	g.Expect(ps).To(ContainSubstring(`"apiVersion":"helm.deployer.landscaper.gardener.cloud/v1alpha1","kind":"ProviderStatus"`))
	g.Expect(ps).To(ContainSubstring(`{"policy":"manage","resource":{"apiVersion":"v1","kind":"ConfigMap","name":"plain-extra","namespace":"` + ns + `"}}`))
	g.Expect(exportOf(g, di)()).To(MatchJSON(`{"fromValues":"hello","fromObject":"hello"}`))

	g.Expect(testutil.Update(ctx, env.Client, get(g, di)(), func(cur *lsv1alpha1.DeployItem) {
		cur.Spec.Config = &runtime.RawExtension{Raw: config("bye", false)}
	})).To(Succeed())
	g.Eventually(exportOf(g, di), timeout, interval).Should(MatchJSON(`{"fromValues":"bye","fromObject":"bye"}`))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "plain-extra"}, &corev1.ConfigMap{})).NotTo(Succeed(), "left the chart: deleted")
	g.Expect(string(get(g, di)().Status.ProviderStatus.Raw)).NotTo(ContainSubstring("plain-extra"))

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(greeting(g, ns, "plain-cm"), timeout, interval).Should(BeEmpty())
	g.Eventually(func() bool { return secretExists(ns, lib.ExportSecretName(di)) }, timeout, interval).Should(BeFalse())
	g.Expect(greeting(g, ns, "plain-kept")()).To(Equal("kept"), "helm.sh/resource-policy: keep is never deleted")
}

// TestRenderedCRDAndItsObject: the chart's CRDs (crds/) are applied with
// the objects, before an object of their kind, which waits until the
// target serves it; deleting the item deletes both.
func TestRenderedCRDAndItsObject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	target(g, ns)
	group := ns + ".example.com"
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.` + group + `}
spec:
  group: ` + group + `
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`
	widget := `apiVersion: ` + group + `/v1
kind: Widget
metadata: {name: w}
spec: {size: 3}
`
	di := createItem(g, ns, "crd", providerConfig(map[string]any{
		"chart": chartOf(t, map[string]string{"crds/widget.yaml": crd, "widget.yaml": widget}), "name": "crd", "namespace": ns,
		"helmDeployment": false,
	}))
	g.Eventually(func() string {
		cur := get(g, di)()
		return fmt.Sprintf("%s %s %+v", cur.Status.Phase, readyMessage(cur), cur.Status.LastError)
	}, timeout, interval).Should(HavePrefix("Succeeded"))
	w := &unstructured.Unstructured{}
	w.SetAPIVersion(group + "/v1")
	w.SetKind("Widget")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w"}, w)).To(Succeed(), "in the release namespace")
	g.Expect(string(get(g, di)().Status.ProviderStatus.Raw)).To(ContainSubstring(`"kind":"CustomResourceDefinition","name":"widgets.` + group + `"`))

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(func() string {
		cur := &lsv1alpha1.DeployItem{}
		if env.Client.Get(ctx, client.ObjectKeyFromObject(di), cur) != nil {
			return "gone"
		}
		return fmt.Sprintf("%s %s %+v", cur.Status.Phase, readyMessage(cur), cur.Status.LastError)
	}, timeout, interval).Should(Equal("gone"))
	crdObj := &unstructured.Unstructured{}
	crdObj.SetAPIVersion("apiextensions.k8s.io/v1")
	crdObj.SetKind("CustomResourceDefinition")
	err := env.Client.Get(ctx, client.ObjectKey{Name: "widgets." + group}, crdObj)
	g.Expect(err != nil || crdObj.GetDeletionTimestamp() != nil).To(BeTrue(), "the CRD is deleted with the item")
}

// modes are the two ways of deploying a chart.
var modes = map[string]bool{"release": true, "rendered": false}

// TestReadinessChecks: the default check waits for the chart's workloads
// (a Deployment never becomes ready in envtest), custom checks for an
// object somebody else creates, named or selected by labels, in both modes.
func TestReadinessChecks(t *testing.T) {
	ns := testutil.Namespace(t, env)
	target(NewWithT(t), ns)
	deployment := `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}-web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: web}]}
`
	for mode, helmDeployment := range modes {
		t.Run(mode, func(t *testing.T) {
			g := NewWithT(t)
			name := "wl-" + mode
			di := createItem(g, ns, name, providerConfig(map[string]any{
				"chart": chartOf(t, map[string]string{"deploy.yaml": deployment}), "name": name, "namespace": ns,
				"helmDeployment": helmDeployment, "readinessChecks": map[string]any{"timeout": "2s"},
			}))
			g.Eventually(get(g, di), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseFailed),
				HaveField("Status.LastError.Reason", manifest.ReasonNotReady),
				HaveField("Status.LastError.Codes", ContainElement(lsv1alpha1.ErrorTimeout)),
				HaveField("Status.LastError.Message", ContainSubstring("not ready within the timeout: Deployment "+ns+"/"+name+"-web"))))

			name = "custom-" + mode
			state := name + "-state"
			di = createItem(g, ns, name, providerConfig(map[string]any{
				"chart": chartOf(t, map[string]string{"cm.yaml": greetingCM}), "name": name, "namespace": ns, "helmDeployment": helmDeployment,
				"readinessChecks": map[string]any{"custom": []map[string]any{{"name": "state-ready",
					"resourceSelector": []map[string]string{{"apiVersion": "v1", "kind": "ConfigMap", "name": state, "namespace": ns}},
					"requirements":     []map[string]any{{"jsonPath": ".data.state", "operator": "In", "values": []map[string]string{{"value": "ready"}}}}}}},
			}))
			g.Eventually(get(g, di), timeout, interval).Should(And(HaveField("Status.Phase", lsv1alpha1.PhaseProgressing),
				WithTransform(readyMessage, ContainSubstring(`custom readiness check "state-ready": ConfigMap `+ns+"/"+state+" (v1) not found"))))
			g.Expect(env.Client.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: state},
				Data: map[string]string{"state": "ready"}})).To(Succeed())
			g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))

			name = "labels-" + mode
			di = createItem(g, ns, name, providerConfig(map[string]any{
				"chart": chartOf(t, map[string]string{"cm.yaml": greetingCM}), "name": name, "namespace": ns, "helmDeployment": helmDeployment,
				"readinessChecks": map[string]any{"custom": []map[string]any{{"name": "labelled",
					"labelSelector": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "matchLabels": map[string]string{"check": name}},
					"requirements":  []map[string]any{{"jsonPath": ".data.state", "operator": "==", "values": []string{"ready"}}}}}},
			}))
			g.Eventually(get(g, di), timeout, interval).Should(And(HaveField("Status.Phase", lsv1alpha1.PhaseProgressing),
				WithTransform(readyMessage, ContainSubstring(`custom readiness check "labelled": no ConfigMap (v1) with labels check=`+name+" yet"))))
			g.Expect(env.Client.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-x",
				Labels: map[string]string{"check": name}}, Data: map[string]string{"state": "ready"}})).To(Succeed())
			g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
		})
	}
}

// TestExportsFromObjects: exports read from the release's objects, also
// through an object reference (fromObjectRef), in both modes.
func TestExportsFromObjects(t *testing.T) {
	ns := testutil.Namespace(t, env)
	target(NewWithT(t), ns)
	sa := `apiVersion: v1
kind: ServiceAccount
metadata: {name: {{ .Release.Name }}-sa}
secrets: [{name: {{ .Release.Name }}-cm}]
`
	for mode, helmDeployment := range modes {
		t.Run(mode, func(t *testing.T) {
			g := NewWithT(t)
			name := "exp-" + mode
			di := createItem(g, ns, name, providerConfig(map[string]any{
				"chart": chartOf(t, map[string]string{"cm.yaml": greetingCM, "sa.yaml": sa}), "name": name, "namespace": ns,
				"helmDeployment": helmDeployment, "values": map[string]any{"greeting": "from " + mode},
				"exportsFromManifests": []map[string]any{{"key": "greeting", "jsonPath": ".data.greeting",
					"fromResource": map[string]string{"apiVersion": "v1", "kind": "ConfigMap", "name": name + "-cm", "namespace": ns}}},
				"exports": map[string]any{"exports": []map[string]any{{"key": "referenced", "jsonPath": ".secrets[0]",
					"fromResource":  map[string]string{"apiVersion": "v1", "kind": "ServiceAccount", "name": name + "-sa", "namespace": ns},
					"fromObjectRef": map[string]string{"apiVersion": "v1", "kind": "ConfigMap", "jsonPath": ".data.greeting"}}}},
			}))
			g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
			g.Expect(secretExists(ns, "sh.helm.release.v1."+name+".v1")).To(Equal(helmDeployment))
			g.Expect(exportOf(g, di)()).To(MatchJSON(`{"greeting":"from ` + mode + `","referenced":"from ` + mode + `"}`))
		})
	}
}

// TestRenderedDeletionGroups: the rendered objects are deleted in the order
// of deletionGroups, each group waiting for the one before.
func TestRenderedDeletionGroups(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	target(g, ns)
	held := `apiVersion: v1
kind: ConfigMap
metadata: {name: first, finalizers: [test.terrace.dev/hold]}
data: {k: v}
`
	di := createItem(g, ns, "groups", providerConfig(map[string]any{
		"chart": chartOf(t, map[string]string{"first.yaml": held, "cm.yaml": greetingCM}), "name": "groups", "namespace": ns,
		"helmDeployment": false, "values": map[string]any{"greeting": "second"},
		"deletionGroups": []map[string]any{
			{"customResourceGroup": map[string]any{"resources": []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "names": []string{"first"}}}}},
			{"predefinedResourceGroup": map[string]any{"type": "namespaced-resources"}},
		},
	}))
	g.Eventually(get(g, di), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	first := &corev1.ConfigMap{}
	g.Eventually(func() bool {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "first"}, first)).To(Succeed())
		return first.DeletionTimestamp != nil
	}, timeout, interval).Should(BeTrue())
	g.Consistently(greeting(g, ns, "groups-cm"), 2*time.Second, interval).Should(Equal("second"), "the second group waits for the first")
	g.Expect(testutil.Update(ctx, env.Client, first, func(c *corev1.ConfigMap) { c.Finalizers = nil })).To(Succeed())
	g.Eventually(greeting(g, ns, "groups-cm"), timeout, interval).Should(BeEmpty())
	g.Eventually(func() bool {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(di), &lsv1alpha1.DeployItem{}) != nil
	}, timeout, interval).Should(BeTrue())
}

// TestBadChecksConfiguration: malformed readiness checks, exports,
// deletion groups and continuousReconcile fail the item, naming the field.
func TestBadChecksConfiguration(t *testing.T) {
	ns := testutil.Namespace(t, env)
	target(NewWithT(t), ns)
	cm := map[string]string{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "namespace": ns}
	cases := []struct {
		name, reason, msg string
		fields            map[string]any
	}{
		{"operator", manifest.ReasonReadinessInvalid, `spec.config.readinessChecks.custom[0].requirements[0]: operator "like" is not one of`,
			map[string]any{"readinessChecks": map[string]any{"custom": []map[string]any{{"name": "c", "resourceSelector": []map[string]string{cm},
				"requirements": []map[string]any{{"jsonPath": ".data", "operator": "like"}}}}}}},
		{"label-selector", manifest.ReasonReadinessInvalid, "spec.config.readinessChecks.custom[0].labelSelector: apiVersion, kind and matchLabels must be set",
			map[string]any{"readinessChecks": map[string]any{"custom": []map[string]any{{"name": "c",
				"labelSelector": map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}, "requirements": []any{}}}}}},
		{"target-name", manifest.ReasonReadinessInvalid, "spec.config.readinessChecks.custom[0].targetName: checks on another Target's cluster are not supported yet",
			map[string]any{"readinessChecks": map[string]any{"custom": []map[string]any{{"name": "c", "targetName": "other",
				"resourceSelector": []map[string]string{cm}, "requirements": []any{}}}}}},
		{"export-path", lib.ReasonInvalidConfig, "spec.config.exports.exports[0]: key, jsonPath and fromResource must be set",
			map[string]any{"exports": map[string]any{"exports": []map[string]any{{"key": "k", "fromResource": cm}}}}},
		{"export-ref", lib.ReasonInvalidConfig, "spec.config.exportsFromManifests[0].fromObjectRef (key \"k\"): needs fromResource",
			map[string]any{"exportsFromManifests": []map[string]any{{"key": "k", "jsonPath": ".spec.ref",
				"fromObjectRef": map[string]string{"apiVersion": "v1", "kind": "Secret", "jsonPath": ".data"}}}}},
		{"group", manifest.ReasonDeletionGroupInvalid, `spec.config.deletionGroups[0].predefinedResourceGroup.type: "pods" is not one of`,
			map[string]any{"helmDeployment": false, "deletionGroups": []map[string]any{{"predefinedResourceGroup": map[string]string{"type": "pods"}}}}},
		{"every", lib.ReasonInvalidConfig, "spec.config.continuousReconcile.every: 500ms is below the deployer's minimum of 1s (--min-continuous-reconcile-interval)",
			map[string]any{"continuousReconcile": map[string]string{"every": "500ms"}}},
		{"cron", lib.ReasonInvalidConfig, `spec.config.continuousReconcile.cron: "61 * * * *": minute field "61": "61" is not a value from 0 to 59`,
			map[string]any{"continuousReconcile": map[string]string{"cron": "61 * * * *"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.fields["chart"], tc.fields["name"], tc.fields["namespace"] = rawArchive(t), tc.name, ns
			di := createItem(g, ns, tc.name, providerConfig(tc.fields))
			g.Eventually(get(g, di), timeout, interval).Should(failedWith(tc.reason, tc.msg))
			g.Expect(greeting(g, ns, tc.name+"-cm")()).To(BeEmpty(), "nothing deployed")
		})
	}
}
