package manifest_test

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
)

// misbehaviour answers a request in place of the target API server and
// reports true, or reports false to let the request through.
type misbehaviour func(w http.ResponseWriter, r *http.Request) bool

// hostileTarget creates the Target ns/name, annotated with the environment
// envName, whose cluster is a TLS server in front of the test API server: it
// answers what misbehave takes and passes the rest on.
func hostileTarget(t *testing.T, g *WithT, ns, name, envName string, misbehave misbehaviour) {
	t.Helper()
	upstream, err := url.Parse(env.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	transport, err := rest.TransportFor(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(upstream) }, Transport: transport}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if misbehave == nil || !misbehave(w, r) {
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: %q, certificate-authority-data: %s}\n"+
		"contexts:\n- name: c\n  context: {cluster: c}\ncurrent-context: c\n", srv.URL, base64.StdEncoding.EncodeToString(ca))
	createTarget(g, ns, name, envName, kc)
}

func createTarget(g *WithT, ns, name, envName, kubeconfig string) {
	cfg, err := json.Marshal(map[string]string{"kubeconfig": kubeconfig})
	g.Expect(err).NotTo(HaveOccurred())
	anyCfg := lsv1alpha1.NewAnyJSON(cfg)
	g.Expect(env.Client.Create(context.Background(), &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{lsv1alpha1.EnvironmentAnnotation: envName}},
		Spec:       lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType, Config: &anyCfg},
	})).To(Succeed())
}

// startDeployer runs a manifest deployer of its own, with opts, for the
// Targets of the environment envName in ns.
func startDeployer(t *testing.T, ns, envName string, opts manifest.Options) {
	t.Helper()
	testutil.StartManager(t, env, func(mgr ctrl.Manager) error {
		sel, err := lib.ParseTargetSelector(lsv1alpha1.EnvironmentAnnotation+"="+envName, "")
		if err != nil {
			return err
		}
		opts.Name, opts.TargetSelector, opts.Namespaces = "manifest-"+envName, sel, []string{ns}
		return manifest.AddToManager(mgr, opts)
	})
}

// patchOf matches the apply (PATCH) of the ConfigMap or Secret name.
func patchOf(r *http.Request, resource, name string) bool {
	return r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/"+resource+"/"+name)
}

// TestGzipBombStopsAtTheResponseCap: a target answers an apply with a small
// gzip body that inflates to 64 MiB. The deployer reads it only up to its
// cap (1 MiB here) — the item fails naming the cap and its flag, so no more
// than the cap was read — and another item of the same deployer completes.
func TestGzipBombStopsAtTheResponseCap(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	startDeployer(t, ns, "bomb", manifest.Options{TargetClients: lib.TargetClientOptions{AllowLoopback: true, MaxResponseBytes: 1 << 20}})
	hostileTarget(t, g, ns, "bomb", "bomb", func(w http.ResponseWriter, r *http.Request) bool {
		if !patchOf(r, "configmaps", "bomb") {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zeros := make([]byte, 1<<20)
		for range 64 {
			if _, err := zw.Write(zeros); err != nil {
				return true // the deployer stopped reading
			}
		}
		_ = zw.Close()
		return true
	})
	hostileTarget(t, g, ns, "good", "bomb", nil)

	bomb := item(ns, "bomb", "bomb", v2(`"manifests":[{"manifest":`+cm(ns, "bomb", map[string]string{"k": "v"})+`}]`))
	good := item(ns, "good", "good", v2(`"manifests":[{"manifest":`+cm(ns, "good", map[string]string{"k": "v"})+`}]`))
	g.Expect(env.Client.Create(ctx, bomb)).To(Succeed())
	g.Expect(env.Client.Create(ctx, good)).To(Succeed())

	g.Eventually(get(g, bomb), timeout, interval).Should(failedWith(lib.ReasonTargetResponseTooLarge, lsv1alpha1.ErrorConfigurationProblem,
		"larger than 1Mi (--target-max-response-bytes)"))
	g.Eventually(get(g, good), timeout, interval).Should(succeeded())
	g.Expect(configMap(g, ns, "good")()).To(Equal(map[string]string{"k": "v"}))
}

// TestSlowLorisTargetHitsTheCallTimeout: a target that answers an apply with
// its headers and then one byte a second never ends the call: the deployer
// cancels it at --call-timeout (2s here), retries, and fails the item at its
// timeout naming the call timeout; meanwhile an item on a good target of the
// same deployer completes.
func TestSlowLorisTargetHitsTheCallTimeout(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	startDeployer(t, ns, "slow", manifest.Options{TargetClients: loopbackTargets, CallTimeout: 2 * time.Second})
	hostileTarget(t, g, ns, "slow", "slow", func(w http.ResponseWriter, r *http.Request) bool {
		if !patchOf(r, "configmaps", "slow") {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if _, err := w.Write([]byte(" ")); err != nil {
				return true
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return true
			case <-tick.C:
			}
		}
	})
	hostileTarget(t, g, ns, "good", "slow", nil)

	slow := item(ns, "slow", "slow", v2(`"manifests":[{"manifest":`+cm(ns, "slow", map[string]string{"k": "v"})+`}]`))
	slow.Spec.Timeout = ptrTo(lsv1alpha1.Duration("5s"))
	good := item(ns, "good", "good", v2(`"manifests":[{"manifest":`+cm(ns, "good", map[string]string{"k": "v"})+`}]`))
	g.Expect(env.Client.Create(ctx, slow)).To(Succeed())
	g.Expect(env.Client.Create(ctx, good)).To(Succeed())

	g.Eventually(get(g, good), timeout, interval).Should(succeeded())
	g.Eventually(get(g, slow), timeout, interval).Should(failedWith(lib.ReasonCallTimeout, lsv1alpha1.ErrorTimeout, "within 2s (--call-timeout)"))
}

// TestSlowTargetStopsAtTheJobTimeoutBetweenManifests: each apply of a slow
// target finishes within the call timeout, but the item's timeout (2s)
// passes between two of its manifests: the job fails there, naming how far
// it got, instead of applying on past its timeout.
func TestSlowTargetStopsAtTheJobTimeoutBetweenManifests(t *testing.T) {
	ns, g := setup(t)
	startDeployer(t, ns, "deadline", manifest.Options{TargetClients: loopbackTargets})
	hostileTarget(t, g, ns, "t", "deadline", func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/configmaps/slowly-") {
			select {
			case <-r.Context().Done():
			case <-time.After(1500 * time.Millisecond):
			}
		}
		return false
	})
	var manifests []string
	for i := range 3 {
		manifests = append(manifests, `{"manifest":`+cm(ns, fmt.Sprintf("slowly-%d", i), map[string]string{"k": "v"})+`}`)
	}
	di := item(ns, "slowly", "t", v2(`"manifests":[`+strings.Join(manifests, ",")+`]`))
	di.Spec.Timeout = ptrTo(lsv1alpha1.Duration("2s"))
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(failedWith(lib.ReasonTimeout, lsv1alpha1.ErrorTimeout, "of 3 manifests applied"))
	g.Expect(configMap(g, ns, "slowly-2")()).To(BeNil(), "nothing is applied after the timeout")
}

// TestLoopbackTargetIsRefused: with --allow-loopback-targets off (the
// default), a Target whose server is 127.0.0.1 or localhost fails at once,
// naming the flag, and nothing reaches the server.
func TestLoopbackTargetIsRefused(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	startDeployer(t, ns, "loopback", manifest.Options{})
	srv := newRecordingServer(t)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	for _, host := range []string{"127.0.0.1", "localhost"} {
		name := strings.ReplaceAll(host, ".", "-")
		createTarget(g, ns, name, "loopback", fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://%s:%s\", insecure-skip-tls-verify: true}\n"+
			"contexts:\n- name: c\n  context: {cluster: c}\ncurrent-context: c\n", host, port))
		di := item(ns, name, name, v2(`"manifests":[{"manifest":`+cm(ns, name, map[string]string{"k": "v"})+`}]`))
		g.Expect(env.Client.Create(ctx, di)).To(Succeed())
		g.Eventually(get(g, di), timeout, interval).Should(failedWith(lib.ReasonTargetAddressRefused, lsv1alpha1.ErrorConfigurationProblem,
			"--allow-loopback-targets"), host)
	}
	g.Expect(srv.requests()).To(BeEmpty(), "no request reached the loopback server")
}

// TestSecretValuesAreNotQuoted: a target that rejects a Secret and echoes
// the request in its error (as an admission webhook may) gets its words
// withheld: the item's lastError, Ready condition and Events name the
// object, the status and the field, never the Secret's data.
func TestSecretValuesAreNotQuoted(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	startDeployer(t, ns, "echo", manifest.Options{TargetClients: loopbackTargets})
	hostileTarget(t, g, ns, "t", "echo", func(w http.ResponseWriter, r *http.Request) bool {
		if !patchOf(r, "secrets", "db") {
			return false
		}
		body, _ := io.ReadAll(r.Body)
		status := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
			Reason:  metav1.StatusReasonInvalid,
			Message: "admission webhook \"check\" denied the request: " + string(body),
			Details: &metav1.StatusDetails{Kind: "secrets", Name: "db", Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "data[password]", Message: string(body)}}},
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_ = json.NewEncoder(w).Encode(status)
		return true
	})
	const password = "hunter2-very-secret"
	secret := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"` + ns + `"},"stringData":{"password":"` + password + `"},` +
		`"data":{"token":"` + base64.StdEncoding.EncodeToString([]byte(password+"-token")) + `"}}`
	di := item(ns, "db", "t", v2(`"manifests":[{"manifest":`+secret+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(failedWith(manifest.ReasonRejected, lsv1alpha1.ErrorConfigurationProblem, "data[password]"))

	leaks := Or(ContainSubstring(password), ContainSubstring(base64.StdEncoding.EncodeToString([]byte(password+"-token"))))
	got := get(g, di)()
	g.Expect(got.Status.LastError.Message).To(And(ContainSubstring("Invalid (422)"), Not(leaks)))
	for _, c := range got.Status.Conditions {
		g.Expect(c.Message).NotTo(leaks)
	}
	g.Eventually(func() []string { return observabilitytest.Events(g, env.Client, ns, "db") }, timeout, interval).
		Should(ContainElement("Warning/" + manifest.ReasonRejected))
	for _, note := range eventNotes(g, ns, "db") {
		g.Expect(note).NotTo(leaks)
	}
}

// TestContinuousReconcileBelowTheMinimumIsRefused: every: 1ns is below the
// deployer's minimum (--min-continuous-reconcile-interval; 1s in these
// tests): the item fails naming the bound, and stays as it is — the
// deployer does not re-apply it in a loop.
func TestContinuousReconcileBelowTheMinimumIsRefused(t *testing.T) {
	ns, g := setup(t)
	target(g, ns, "t", nil)
	di := item(ns, "spin", "t", v2(`"manifests":[{"manifest":`+cm(ns, "spin", map[string]string{"k": "v"})+`}],"continuousReconcile":{"every":"1ns"}`))
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(failedWith(lib.ReasonInvalidConfig, lsv1alpha1.ErrorConfigurationProblem,
		"continuousReconcile.every: 1ns is below the deployer's minimum of 1s (--min-continuous-reconcile-interval)"))
	g.Expect(get(g, di)().Status.Conditions).To(ContainElement(And(HaveField("Type", "Ready"), HaveField("Status", metav1.ConditionFalse),
		HaveField("Message", ContainSubstring("--min-continuous-reconcile-interval")))))
	rv := get(g, di)().ResourceVersion
	g.Consistently(func() string { return get(g, di)().ResourceVersion }, 3*time.Second, 100*time.Millisecond).Should(Equal(rv),
		"the failed item is not re-applied")
}

func ptrTo[T any](v T) *T { return &v }

// eventNotes are the notes of the Events on the item ns/name.
func eventNotes(g *WithT, ns, name string) []string {
	var list eventsv1.EventList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Note)
		}
	}
	return out
}
