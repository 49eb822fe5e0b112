package suite

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// span is one line of the trace file (the OpenTelemetry stdout exporter's
// JSON form of a finished span).
type span struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Attributes  []keyValue
	Resource    []keyValue

	service string
	attrs   map[string]string
}

type keyValue struct {
	Key   string
	Value struct{ Value any }
}

const noSpan = "0000000000000000"

func (s span) hasParent() bool { return s.Parent.SpanID != "" && s.Parent.SpanID != noSpan }

func (s span) String() string {
	return fmt.Sprintf("%s %s %s/%s job=%s (span %s parent %s)", s.service, s.Name,
		s.attrs["k8s.namespace.name"], s.attrs["terrace.name"], s.attrs["terrace.job_id"], s.SpanContext.SpanID, s.Parent.SpanID)
}

// readSpans reads every span the local environment's controllers wrote.
func readSpans() []span {
	f, err := os.Open(env.TracesFile)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	var out []span
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<24)
	for sc.Scan() {
		var s span
		Expect(json.Unmarshal(sc.Bytes(), &s)).To(Succeed(), "a trace file line: %s", sc.Text())
		s.attrs = map[string]string{}
		for _, kv := range s.Attributes {
			s.attrs[kv.Key] = fmt.Sprint(kv.Value.Value)
		}
		for _, kv := range s.Resource {
			if kv.Key == "service.name" {
				s.service = fmt.Sprint(kv.Value.Value)
			}
		}
		out = append(out, s)
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return out
}

// traceOf returns every span of the trace holding the first span that
// matches, or nil.
func traceOf(spans []span, match func(span) bool) []span {
	id := ""
	for _, s := range spans {
		if match(s) {
			id = s.SpanContext.TraceID
			break
		}
	}
	if id == "" {
		return nil
	}
	var out []span
	for _, s := range spans {
		if s.SpanContext.TraceID == id {
			out = append(out, s)
		}
	}
	return out
}

// expectConnected asserts that every span's parent is in the trace (the
// hand-overs through annotations kept the links), that there is one root, and
// returns it.
func expectConnected(g Gomega, trace []span) span {
	ids := map[string]bool{}
	for _, s := range trace {
		ids[s.SpanContext.SpanID] = true
	}
	var roots []span
	for _, s := range trace {
		if !s.hasParent() {
			roots = append(roots, s)
			continue
		}
		g.Expect(ids).To(HaveKey(s.Parent.SpanID), "the parent of %s is in the trace", s)
	}
	g.Expect(roots).To(HaveLen(1), "one root span")
	return roots[0]
}

func services(trace []span) []string {
	set := map[string]bool{}
	for _, s := range trace {
		set[s.service] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func dumpTrace(trace []span) string {
	lines := make([]string, 0, len(trace))
	for _, s := range trace {
		lines = append(lines, s.String())
	}
	return strings.Join(lines, "\n")
}

// metrics scrapes every Terrace binary's /metrics and sums each series over
// the binaries; keys are "name{label="value",...}" with labels sorted.
func metrics(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	for _, b := range binaries {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+env.metricsPort(b)+"/metrics", nil)
		Expect(err).NotTo(HaveOccurred())
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred(), "scraping %s", b)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		_ = resp.Body.Close()
		Expect(err).NotTo(HaveOccurred(), "parsing %s's metrics", b)
		for name, mf := range families {
			for _, m := range mf.GetMetric() {
				addSample(out, name, mf.GetType(), m)
			}
		}
	}
	return out
}

func addSample(out map[string]float64, name string, typ dto.MetricType, m *dto.Metric) {
	labels := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(labels)
	key := name + "{" + strings.Join(labels, ",") + "}"
	switch typ {
	case dto.MetricType_COUNTER:
		out[key] += m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		out[key] += m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		out[strings.Replace(key, "{", "_count{", 1)] += float64(m.GetHistogram().GetSampleCount())
	default:
	}
}

// sumOf adds the series of metric name whose labels include every given
// label (`name="value"`).
func sumOf(all map[string]float64, name string, labels ...string) float64 {
	total := 0.0
	for key, v := range all {
		metric, rest, _ := strings.Cut(key, "{")
		if metric != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

var _ = Describe("Observability", func() {
	BeforeEach(func() {
		if !env.Local() {
			Skip("reads the controllers' trace file and metrics ports: needs the self-started local environment")
		}
	})

	It("traces one installation job as one trace across the installation controller, execution controller and deployers", func(ctx SpecContext) {
		ns := newNamespace(ctx, "traced")
		createTarget(ctx, ns, "local-cluster", clusterKubeconfig(ctx, ns))
		root := createInstallation(ctx, ns, landscapeYAML(ns+"-app"))
		Eventually(installationJob(ctx, ns, root.Name)).WithContext(ctx).
			Should(Equal(lsv1alpha1.PhaseSucceeded), func() string { return describe(ctx, ns) })
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(root), root)).To(Succeed())
		job := root.Status.JobID
		manifests := itemsOf(ctx, ns)["manifests"]

		// The job's trace is the one the manifest deployer's apply joined.
		Eventually(func(g Gomega) {
			trace := traceOf(readSpans(), func(s span) bool {
				return s.service == "manifest-deployer" && s.attrs["k8s.namespace.name"] == ns &&
					s.attrs["terrace.name"] == manifests.Name && s.attrs["terrace.job_id"] == job
			})
			g.Expect(trace).NotTo(BeEmpty(), "a manifest-deployer span for the job")
			g.Expect(services(trace)).To(ContainElements("installation-controller", "execution-controller", "manifest-deployer", "mock-deployer"), dumpTrace(trace))

			rootSpan := expectConnected(g, trace)
			g.Expect(rootSpan.service).To(Equal("installation-controller"), dumpTrace(trace))
			g.Expect(rootSpan.attrs).To(HaveKeyWithValue("terrace.kind", "Installation"))
			g.Expect(rootSpan.attrs).To(HaveKeyWithValue("terrace.name", root.Name))

			reconciled := map[string]bool{}
			for _, s := range trace {
				if s.attrs["terrace.job_id"] == job {
					reconciled[s.attrs["terrace.kind"]+"/"+s.attrs["terrace.name"]] = true
				}
			}
			g.Expect(reconciled).To(HaveKey("Installation/"+root.Name), dumpTrace(trace))
			g.Expect(reconciled).To(HaveKey("Installation/"+root.Name+"-database"), dumpTrace(trace))
			g.Expect(reconciled).To(HaveKey("Installation/"+root.Name+"-app"), dumpTrace(trace))
			g.Expect(reconciled).To(HaveKey("DeployItem/"+manifests.Name), dumpTrace(trace))
			kinds := map[string]bool{}
			for k := range reconciled {
				kinds[strings.Split(k, "/")[0]] = true
			}
			g.Expect(kinds).To(HaveKey("Execution"), dumpTrace(trace))
		}).WithContext(ctx).Should(Succeed())
	})

	It("traces a claim's dynamic provisioning as one trace across the binder, provisioner and stub", func(ctx SpecContext) {
		ns := newNamespace(ctx, "traced-claim")
		applyFile(ctx, "", "examples/seeds/004-step0-deploymenttargetclass.yaml")
		claim := applyFile(ctx, ns, "examples/seeds/004-step1-deploymenttargetclaim.yaml")[0]
		deleteAndWait(&appstudiov1alpha1.DeploymentTargetClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim.GetName()}})
		p := waitBound(ctx, ns, claim.GetName())

		// The trace the stub's work on the claim's SpaceRequest joined.
		Eventually(func(g Gomega) {
			trace := traceOf(readSpans(), func(s span) bool {
				return s.service == "spacerequest-stub" && s.attrs["k8s.namespace.name"] == ns &&
					s.attrs["terrace.name"] == p.spaceRequest.Name
			})
			g.Expect(trace).NotTo(BeEmpty(), "a spacerequest-stub span for the SpaceRequest")
			g.Expect(services(trace)).To(ContainElements("dt-binder", "sandbox-provisioner", "spacerequest-stub"), dumpTrace(trace))
			rootSpan := expectConnected(g, trace)
			g.Expect(rootSpan.service).To(Equal("dt-binder"), dumpTrace(trace))
			g.Expect(rootSpan.attrs).To(HaveKeyWithValue("terrace.kind", "DeploymentTargetClaim"))
			g.Expect(rootSpan.attrs).To(HaveKeyWithValue("terrace.name", claim.GetName()))
		}).WithContext(ctx).Should(Succeed())

		By("the objects handed over carry the trace context annotation")
		for _, obj := range []client.Object{p.claim, p.spaceRequest, p.target} {
			Expect(obj.GetAnnotations()).To(HaveKey("terrace.dev/trace-context"), "%T %s", obj, obj.GetName())
		}
	})

	It("serves Terrace's metrics on every binary with the values of the jobs run", func(ctx SpecContext) {
		ns := newNamespace(ctx, "metrics")
		createTarget(ctx, ns, "cluster", clusterKubeconfig(ctx, ns))
		before := metrics(ctx)

		root := createInstallation(ctx, ns, installation("measured", mockItem("mock", "phase: Succeeded")+configMapItem("config", ns, "measured")))
		Eventually(installationJob(ctx, ns, root.Name)).WithContext(ctx).
			Should(Equal(lsv1alpha1.PhaseSucceeded), func() string { return describe(ctx, ns) })
		applyFile(ctx, "", "examples/seeds/004-step0-deploymenttargetclass.yaml")
		claim := &appstudiov1alpha1.DeploymentTargetClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "measured"},
			Spec:       appstudiov1alpha1.DeploymentTargetClaimSpec{DeploymentTargetClassName: "isolation-level-namespace"},
		}
		Expect(env.Client.Create(ctx, claim)).To(Succeed())
		deleteAndWait(claim)
		waitBound(ctx, ns, claim.Name)

		delta := func(g Gomega, name string, labels ...string) float64 {
			return sumOf(metrics(ctx), name, labels...) - sumOf(before, name, labels...)
		}
		Eventually(func(g Gomega) {
			for _, kind := range []string{"Installation", "Execution"} {
				g.Expect(delta(g, "terrace_jobs_started_total", `kind="`+kind+`"`)).To(BeNumerically("==", 1), kind)
				g.Expect(delta(g, "terrace_jobs_finished_total", `kind="`+kind+`"`, `result="Succeeded"`)).To(BeNumerically("==", 1), kind)
				g.Expect(delta(g, "terrace_job_duration_seconds_count", `kind="`+kind+`"`, `result="Succeeded"`)).To(BeNumerically("==", 1), kind)
			}
			g.Expect(delta(g, "terrace_jobs_finished_total", `kind="DeployItem"`, `result="Succeeded"`)).To(BeNumerically("==", 2))
			g.Expect(delta(g, "terrace_deployitem_pickup_latency_seconds_count", `deployer="mock`)).To(BeNumerically("==", 1))
			g.Expect(delta(g, "terrace_deployitem_pickup_latency_seconds_count", `deployer="manifest`)).To(BeNumerically("==", 1))
			g.Expect(delta(g, "terrace_claim_bind_duration_seconds_count")).To(BeNumerically("==", 1))
			g.Expect(delta(g, "terrace_spacerequest_provisioning_duration_seconds_count")).To(BeNumerically("==", 1))
			now := metrics(ctx)
			g.Expect(sumOf(now, "terrace_object_phase", `kind="Installation"`, `namespace="`+ns+`"`, `name="measured"`, `phase="Succeeded"`)).To(BeNumerically("==", 1))
			g.Expect(sumOf(now, "terrace_object_phase", `kind="DeploymentTargetClaim"`, `namespace="`+ns+`"`, `name="measured"`, `phase="Bound"`)).To(BeNumerically("==", 1))
		}).WithContext(ctx).Should(Succeed())

		By("deleting the objects deletes their per-object series")
		Expect(env.Client.Delete(ctx, root)).To(Succeed())
		Expect(env.Client.Delete(ctx, claim)).To(Succeed())
		Eventually(func(g Gomega) {
			now := metrics(ctx)
			g.Expect(sumOf(now, "terrace_object_phase", `namespace="`+ns+`"`)).To(BeZero())
			for key := range now {
				g.Expect(key).NotTo(ContainSubstring(`namespace="`+ns+`"`), "a series of a deleted object")
			}
		}).WithContext(ctx).Should(Succeed())
	})
})
