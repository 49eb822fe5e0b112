package installation_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/executionstub"
	"github.com/terrace-dev/terrace/kit/registrytest"
)

// tagCountingProxy forwards to the registry at host and counts the tag
// lookups (HEAD of a manifest by tag, not by digest); it returns its own
// host:port on loopback.
func tagCountingProxy(t *testing.T, host string, lookups *atomic.Int64) string {
	t.Helper()
	forward := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ref, isManifest := strings.Cut(r.URL.Path, "/manifests/")
		if r.Method == http.MethodHead && isManifest && !strings.Contains(ref, ":") {
			lookups.Add(1)
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// One job of a component installation looks the version's tag up once,
// though Init and Completing both read the blueprint; the next job looks
// it up again.
func TestComponentJobLooksItsTagUpOnce(t *testing.T) {
	ns, g := setup(t)
	host := registrytest.Start(t)
	push(t, host+"/ocm", componentSpec{name: "example.org/app", version: "1.0.0",
		blueprints: map[string]map[string]string{"bp": simpleBlueprint("")}})
	var lookups atomic.Int64
	proxy := tagCountingProxy(t, host, &lookups)
	create(g, componentInstallation(ns, "inst", ociContext(proxy+"/ocm"), "example.org/app", "1.0.0", "bp"))

	g.Eventually(getInst(ns, "inst"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded),
		func() string { i, _ := getInst(ns, "inst")(); return lastError(i) })
	g.Expect(lookups.Load()).To(BeEquivalentTo(1), "tag lookups of the first job")

	first, _ := getInst(ns, "inst")()
	annotate(g, first, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(getInst(ns, "inst"), timeout, interval).Should(And(finishedIn(lsv1alpha1.PhaseSucceeded),
		WithTransform(func(i *lsv1alpha1.Installation) string { return i.Status.JobID }, Not(Equal(first.Status.JobID)))))
	g.Expect(lookups.Load()).To(BeEquivalentTo(2), "tag lookups of both jobs")
}

// markerBlueprint exports marker from its export execution; its deploy item
// is configured by itemConfig.
func markerBlueprint(marker, itemConfig string) map[string]string {
	bp := simpleBlueprint(itemConfig)
	bp["blueprint.yaml"] = strings.Replace(bp["blueprint.yaml"], "deployExecutions:", `exports:
- name: marker
  type: data
  schema: {type: string}
deployExecutions:`, 1) + fmt.Sprintf(`
exportExecutions:
- name: default
  type: GoTemplate
  template: |
    exports:
      marker: %s
`, marker)
	return bp
}

// A tag moved while a job runs does not change the blueprint the job's
// Completing exports with: it is the one Init rendered. The next job reads
// the moved tag.
func TestComponentTagMovedDuringAJobKeepsTheJobsBlueprint(t *testing.T) {
	ns, g := setup(t)
	base := registrytest.Start(t) + "/ocm"
	// The item stays Progressing: the job waits for the test to end it.
	push(t, base, componentSpec{name: "example.org/app", version: "1.0.0",
		blueprints: map[string]map[string]string{"bp": markerBlueprint("first", "      phase: Progressing")}})
	inst := componentInstallation(ns, "inst", ociContext(base), "example.org/app", "1.0.0", "bp")
	inst.Spec.Exports.Data = []lsv1alpha1.DataExport{{Name: "marker", DataRef: "marker"}}
	create(g, inst)
	g.Eventually(getInst(ns, "inst"), timeout, interval).Should(inPhase(lsv1alpha1.PhaseProgressing),
		func() string { i, _ := getInst(ns, "inst")(); return lastError(i) })
	g.Eventually(getExec(ns, "inst"), timeout, interval).Should(
		WithTransform(func(e *lsv1alpha1.Execution) lsv1alpha1.Phase { return e.Status.Phase }, Equal(lsv1alpha1.PhaseProgressing)))

	push(t, base, componentSpec{name: "example.org/app", version: "1.0.0",
		blueprints: map[string]map[string]string{"bp": markerBlueprint("second", "")}})
	finishExecution(g, ns, "inst")
	g.Eventually(getInst(ns, "inst"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded),
		func() string { i, _ := getInst(ns, "inst")(); return lastError(i) })
	g.Expect(dataObject(g, ns, "marker")).To(MatchJSON(`"first"`), "the export of the blueprint the job started with")

	annotate(g, inst, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(func() string { return dataObject(g, ns, "marker") }, timeout, interval).Should(MatchJSON(`"second"`))
}

// finishExecution ends the execution's running job Succeeded, as the
// execution controller would.
func finishExecution(g Gomega, ns, name string) {
	exec, err := getExec(ns, name)()
	g.Expect(err).NotTo(HaveOccurred())
	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"status":{"phase":%q,"jobIDFinished":%q}}`,
		exec.ResourceVersion, lsv1alpha1.PhaseSucceeded, exec.Status.JobID)
	g.Expect(env.Client.Status().Patch(context.Background(), exec, client.RawPatch("application/merge-patch+json", []byte(patch)),
		client.FieldOwner(executionstub.FieldManager))).To(Succeed())
}
