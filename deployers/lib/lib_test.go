package lib_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/testenv"
)

// The recorder deployer serves a test-only type; it records every call and
// every hook per item, and each test steers it through per-namespace behaviour.
const testType = "test.terrace.dev/recorder"

const (
	scopedType      = "test.terrace.dev/scoped"
	scopedNamespace = "scoped-in"
)

// selectiveType is served by a deployer whose target selector matches only
// Targets labelled env=fenced.
const selectiveType = "test.terrace.dev/selective"

var (
	env *testenv.Env
	rec = &recorder{traces: map[string][][]string{}, behaviour: map[string]*behaviour{}}
	// selective is the recorder of the selectiveType deployer.
	selective = &recorder{traces: map[string][][]string{}, behaviour: map[string]*behaviour{}}
)

func TestMain(m *testing.M) {
	os.Exit(testutil.RunMain(m, &env, func(mgr ctrl.Manager) error {
		if err := lib.AddToManager(mgr, rec, lib.Options{Type: testType, Name: "recorder", Version: "v0"}); err != nil {
			return err
		}
		sel, err := lib.ParseTargetSelector("", "env=fenced")
		if err != nil {
			return err
		}
		if err := lib.AddToManager(mgr, selective, lib.Options{Type: selectiveType, Name: "selective", TargetSelector: sel}); err != nil {
			return err
		}
		// A deployer of another type restricted to one namespace.
		return lib.AddToManager(mgr, &recorder{traces: map[string][][]string{}, behaviour: map[string]*behaviour{}},
			lib.Options{Type: scopedType, Name: "scoped", Namespaces: []string{scopedNamespace}})
	}))
}

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

// behaviour steers the hooks and the deployer for the items of one namespace.
type behaviour struct {
	// hook results per hook type (nil: return nil).
	hook map[extension.HookType]func(di *lsv1alpha1.DeployItem) (*extension.HookResult, error)
	// pending makes Reconcile report unfinished work.
	pending bool
	// fail makes Reconcile return this error.
	fail error
	// badStatus makes Reconcile set a provider status the CRD schema refuses.
	badStatus bool
	// onReconcile, when set, runs at the start of Reconcile.
	onReconcile func(req *lib.Request)
	// deleteFail makes Delete return this error; deletePending makes it
	// report unfinished work.
	deleteFail    error
	deletePending bool
	// onDelete, when set, runs at the start of Delete.
	onDelete func(req *lib.Request)
	// export, when set, makes Reconcile write it to the export Secret
	// (lib.WriteExport) and Delete remove that (lib.DeleteExport).
	export []byte
}

type recorder struct {
	mu sync.Mutex
	// traces[ns/name] is one list of steps per reconcile (a Start hook opens one).
	traces    map[string][][]string
	behaviour map[string]*behaviour
}

func (r *recorder) set(ns string, b *behaviour) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.behaviour[ns] = b
}

func (r *recorder) get(ns string) *behaviour {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.behaviour[ns]; b != nil {
		return b
	}
	return &behaviour{}
}

func (r *recorder) step(key string, step string, newTrace bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if newTrace || len(r.traces[key]) == 0 {
		r.traces[key] = append(r.traces[key], nil)
	}
	t := r.traces[key]
	t[len(t)-1] = append(t[len(t)-1], step)
}

// Traces returns the reconciles of an item, each as "step,step,...".
func (r *recorder) Traces(ns, name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, t := range r.traces[ns+"/"+name] {
		out = append(out, strings.Join(t, ","))
	}
	return out
}

func (r *recorder) hook(ctx context.Context, _ logr.Logger, di *lsv1alpha1.DeployItem, target *lsv1alpha1.Target, ht extension.HookType) (*extension.HookResult, error) {
	req, ok := lib.RequestFromContext(ctx)
	if !ok {
		return nil, errors.New("no request in context")
	}
	if ht == extension.StartHook && (di != nil || target != nil) {
		return nil, errors.New("start hook got an item or target")
	}
	r.step(req.String(), string(ht), ht == extension.StartHook)
	if di == nil {
		return nil, nil
	}
	if f := r.get(req.Namespace).hook[ht]; f != nil {
		return f(di)
	}
	return nil, nil
}

func (r *recorder) ExtensionHooks() extension.ReconcileExtensionHooks {
	return extension.ReconcileExtensionHooks{}.RegisterHookSetup(extension.ReconcileExtensionHookSetup{
		Hook: r.hook, HookTypes: extension.AllHookTypes,
	})
}

func (r *recorder) call(op string, req *lib.Request) (lib.Result, error) {
	name := op
	if req.Forced {
		name += "(forced)"
	}
	r.step(req.Item.Namespace+"/"+req.Item.Name, name, false)
	b := r.get(req.Item.Namespace)
	if op == "Reconcile" {
		if b.onReconcile != nil {
			b.onReconcile(req)
		}
		if b.fail != nil {
			return lib.Result{}, b.fail
		}
		if b.pending {
			return lib.PendingFor(0, "waiting"), nil
		}
		if b.export != nil {
			if err := lib.WriteExport(context.Background(), env.Client, "recorder", req.Item, b.export); err != nil {
				return lib.Result{}, err
			}
		}
		if b.badStatus {
			// The schema requires a name (minLength 1).
			req.Item.Status.ExportReference = &lsv1alpha1.ObjectReference{Name: ""}
		}
	}
	if op == "Delete" {
		if b.onDelete != nil {
			b.onDelete(req)
		}
		if b.deleteFail != nil {
			return lib.Result{}, b.deleteFail
		}
		if b.deletePending {
			return lib.PendingFor(0, "objects still terminating"), nil
		}
		if b.export != nil {
			if err := lib.DeleteExport(context.Background(), env.Client, req.Item); err != nil {
				return lib.Result{}, err
			}
		}
	}
	return lib.Done(), nil
}

func (r *recorder) Reconcile(_ context.Context, req *lib.Request) (lib.Result, error) {
	return r.call("Reconcile", req)
}

func (r *recorder) Delete(_ context.Context, req *lib.Request) (lib.Result, error) {
	return r.call("Delete", req)
}

func (r *recorder) Abort(_ context.Context, req *lib.Request) (lib.Result, error) {
	return r.call("Abort", req)
}

func (r *recorder) ForceReconcile(_ context.Context, req *lib.Request) (lib.Result, error) {
	return r.call("ForceReconcile", req)
}

func setup(t *testing.T, b *behaviour) (string, *WithT) {
	t.Helper()
	ns := testutil.Namespace(t, env)
	if b != nil {
		rec.set(ns, b)
	}
	return ns, NewWithT(t)
}

func newItem(ns, name string) *lsv1alpha1.DeployItem {
	return &lsv1alpha1.DeployItem{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       lsv1alpha1.DeployItemSpec{Type: testType},
	}
}

func get(g *WithT, di *lsv1alpha1.DeployItem) func() *lsv1alpha1.DeployItem {
	return func() *lsv1alpha1.DeployItem {
		out := &lsv1alpha1.DeployItem{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(di), out)).To(Succeed())
		return out
	}
}

func phase(p lsv1alpha1.Phase) OmegaMatcher {
	return WithTransform(func(di *lsv1alpha1.DeployItem) lsv1alpha1.Phase { return di.Status.Phase }, Equal(p))
}

func finished() OmegaMatcher {
	return WithTransform(func(di *lsv1alpha1.DeployItem) bool {
		return di.Status.JobID != "" && di.Status.JobID == di.Status.JobIDFinished && di.Status.Phase.IsFinal()
	}, BeTrue())
}

// settled: finished, with the deployer's finalizer. (A job that starts on an
// item without the finalizer writes it before the work; annotation removals
// of later reconciles follow their status write.)
func settled() OmegaMatcher {
	return And(finished(), WithTransform(func(di *lsv1alpha1.DeployItem) []string { return di.Finalizers },
		ContainElement(lsv1alpha1.Finalizer)))
}

func annotate(g *WithT, di *lsv1alpha1.DeployItem, kv ...string) {
	g.Expect(testutil.Update(context.Background(), env.Client, di.DeepCopy(), func(cur *lsv1alpha1.DeployItem) {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			cur.Annotations[kv[i]] = kv[i+1]
		}
	})).To(Succeed())
}

// respSteps are the steps every reconcile of an item the deployer serves
// begins with. The reconcile that starts a job goes on to work on it.
const respSteps = "Start,DuringResponsibilityCheck,AfterResponsibilityCheck"

// TestHooksAtTheirPlaceInTheFlow checks the order of every hook type for
// each operation: Reconcile, ForceReconcile, Abort and Delete.
func TestHooksAtTheirPlaceInTheFlow(t *testing.T) {
	ns, g := setup(t, nil)
	ctx := context.Background()
	di := newItem(ns, "flow")
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
	g.Expect(rec.Traces(ns, "flow")).To(ContainElement(
		respSteps + ",ShouldReconcile,BeforeAnyReconcile,BeforeReconcile,Reconcile,End",
	))
	// A finished item: the should-reconcile check ends the reconcile.
	g.Eventually(func() []string { return rec.Traces(ns, "flow") }, timeout, interval).Should(ContainElement(respSteps + ",ShouldReconcile"))

	annotate(g, di, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationForceReconcile))
	g.Eventually(func() []string { return rec.Traces(ns, "flow") }, timeout, interval).Should(
		ContainElement(respSteps + ",ShouldReconcile,BeforeAnyReconcile,BeforeForceReconcile,ForceReconcile,End"))

	// Abort: keep the item pending, then abort it.
	rec.set(ns, &behaviour{pending: true})
	annotate(g, di, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(get(g, di), timeout, interval).Should(phase(lsv1alpha1.PhaseProgressing))
	annotate(g, di, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationAbort))
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))
	g.Expect(rec.Traces(ns, "flow")).To(ContainElement(respSteps + ",ShouldReconcile,BeforeAnyReconcile,BeforeAbort,Abort,End"))
	g.Expect(get(g, di)().Status.LastError).To(And(HaveField("Operation", lib.OperationAbort), HaveField("Reason", lib.ReasonAborted)))

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(di), &lsv1alpha1.DeployItem{}))
	}, timeout, interval).Should(BeTrue())
	g.Expect(rec.Traces(ns, "flow")).To(ContainElement(respSteps + ",ShouldReconcile,BeforeAnyReconcile,BeforeDelete,Delete,End"))
}

func TestDuringResponsibilityCheckOverrides(t *testing.T) {
	ns, g := setup(t, &behaviour{hook: map[extension.HookType]func(*lsv1alpha1.DeployItem) (*extension.HookResult, error){
		extension.DuringResponsibilityCheckHook: func(di *lsv1alpha1.DeployItem) (*extension.HookResult, error) {
			// The type check alone would take "not-" items; the hook refuses them.
			if strings.HasPrefix(di.Name, "not-") {
				return &extension.HookResult{AbortReconcile: true}, nil
			}
			return nil, nil
		},
	}})
	ctx := context.Background()
	refused := newItem(ns, "not-me")
	g.Expect(env.Client.Create(ctx, refused)).To(Succeed())
	created := get(g, refused)()
	g.Consistently(func() string { return get(g, refused)().ResourceVersion }, time.Second, 100*time.Millisecond).Should(Equal(created.ResourceVersion))
	g.Expect(rec.Traces(ns, "not-me")).To(HaveEach(respSteps[:strings.LastIndex(respSteps, ",")]))
}

func TestShouldReconcileHookForcesReapply(t *testing.T) {
	var once sync.Once
	forced := make(chan struct{})
	ns, g := setup(t, &behaviour{hook: map[extension.HookType]func(*lsv1alpha1.DeployItem) (*extension.HookResult, error){
		extension.ShouldReconcileHook: func(di *lsv1alpha1.DeployItem) (*extension.HookResult, error) {
			if di.Status.Phase != lsv1alpha1.PhaseSucceeded {
				// AbortReconcile true cannot stop a reconcile the default logic needs.
				return &extension.HookResult{AbortReconcile: true}, nil
			}
			var res *extension.HookResult
			once.Do(func() {
				res = &extension.HookResult{AbortReconcile: false}
				close(forced)
			})
			return res, nil
		},
	}})
	di := newItem(ns, "reapply")
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
	// Something must wake the item after Succeeded for the hook to run: the
	// Succeeded write itself does.
	g.Eventually(forced, timeout).Should(BeClosed())
	g.Eventually(func() []string { return rec.Traces(ns, "reapply") }, timeout, interval).Should(
		ContainElement(respSteps + ",ShouldReconcile,BeforeAnyReconcile,BeforeReconcile,Reconcile(forced),End"))
	g.Expect(get(g, di)()).To(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
}

func TestBeforeReconcileHookAborts(t *testing.T) {
	ns, g := setup(t, &behaviour{hook: map[extension.HookType]func(*lsv1alpha1.DeployItem) (*extension.HookResult, error){
		extension.BeforeReconcileHook: func(*lsv1alpha1.DeployItem) (*extension.HookResult, error) {
			return &extension.HookResult{AbortReconcile: true}, nil
		},
	}})
	di := newItem(ns, "held")
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(phase(lsv1alpha1.PhaseInit))
	g.Consistently(func() []string { return rec.Traces(ns, "held") }, time.Second, 100*time.Millisecond).ShouldNot(
		ContainElement(ContainSubstring(",Reconcile")))
	g.Eventually(func() []string { return rec.Traces(ns, "held") }, timeout, interval).Should(ContainElement(respSteps + ",ShouldReconcile,BeforeAnyReconcile,BeforeReconcile"))
}

func TestHookErrorIsRetriedAndReported(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	ns, g := setup(t, &behaviour{hook: map[extension.HookType]func(*lsv1alpha1.DeployItem) (*extension.HookResult, error){
		extension.BeforeAnyReconcileHook: func(*lsv1alpha1.DeployItem) (*extension.HookResult, error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls == 1 {
				return nil, errors.New("hook failed once")
			}
			return nil, nil
		},
	}})
	di := newItem(ns, "hookerr")
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
	g.Expect(slices.ContainsFunc(rec.Traces(ns, "hookerr"), func(s string) bool { return strings.HasSuffix(s, "BeforeAnyReconcile") })).To(BeTrue())
}

func TestRequeueAfterFromHooks(t *testing.T) {
	// An End hook asking for a requeue brings the finished item back without
	// any change to it: the hook result is the reconcile's result.
	var mu sync.Mutex
	ends := 0
	ns, g := setup(t, &behaviour{hook: map[extension.HookType]func(*lsv1alpha1.DeployItem) (*extension.HookResult, error){
		extension.ShouldReconcileHook: func(di *lsv1alpha1.DeployItem) (*extension.HookResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if di.Status.Phase == lsv1alpha1.PhaseSucceeded && ends < 3 {
				return &extension.HookResult{AbortReconcile: false}, nil
			}
			return nil, nil
		},
		extension.EndHook: func(*lsv1alpha1.DeployItem) (*extension.HookResult, error) {
			mu.Lock()
			defer mu.Unlock()
			ends++
			return &extension.HookResult{ReconcileResult: ctrl.Result{RequeueAfter: 200 * time.Millisecond}}, nil
		},
	}})
	di := newItem(ns, "periodic")
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(func() int {
		mu.Lock()
		defer mu.Unlock()
		return ends
	}, timeout, interval).Should(BeNumerically(">=", 3))
}

func TestTransientErrorRetriesThenFailsAtTimeout(t *testing.T) {
	ns, g := setup(t, &behaviour{fail: errors.New("cluster unreachable")})
	di := newItem(ns, "flaky")
	d := lsv1alpha1.Duration("3s")
	di.Spec.Timeout = &d
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseProgressing),
		WithTransform(func(d *lsv1alpha1.DeployItem) *lsv1alpha1.Error { return d.Status.LastError }, Not(BeNil()))))
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))
	le := get(g, di)().Status.LastError
	g.Expect(le.Message).To(ContainSubstring("cluster unreachable"))
	g.Expect(le.Codes).To(ContainElements(lsv1alpha1.ErrorInternalProblem, lsv1alpha1.ErrorTimeout))
	g.Expect(le.Reason).To(Equal(lib.ReasonReconcileFailed))
}

func TestConfigErrorFailsAtOnce(t *testing.T) {
	ns, g := setup(t, &behaviour{fail: lib.ConfigError("BadThing", "spec.config.thing: is bad")})
	di := newItem(ns, "bad")
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), settled()))
	le := get(g, di)().Status.LastError
	g.Expect(le).To(And(HaveField("Reason", "BadThing"), HaveField("Operation", lib.OperationReconcile),
		HaveField("Codes", ConsistOf(lsv1alpha1.ErrorConfigurationProblem))))
	// Failed for good: no retries, no further writes.
	rv := get(g, di)().ResourceVersion
	g.Consistently(func() string { return get(g, di)().ResourceVersion }, time.Second, 100*time.Millisecond).Should(Equal(rv))
}

func TestTargetProblems(t *testing.T) {
	ns, g := setup(t, nil)
	ctx := context.Background()
	other := newItem(ns, "other-ns")
	other.Spec.Target = &lsv1alpha1.ObjectReference{Name: "t", Namespace: "kube-system"}
	missing := newItem(ns, "missing")
	missing.Spec.Target = &lsv1alpha1.ObjectReference{Name: "nope"}
	noContext := newItem(ns, "no-context")
	noContext.Spec.Context = "nope"
	defaultContext := newItem(ns, "default-context")
	defaultContext.Spec.Context = lsv1alpha1.DefaultContextName
	for _, di := range []*lsv1alpha1.DeployItem{other, missing, noContext, defaultContext} {
		g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	}
	for di, reason := range map[*lsv1alpha1.DeployItem]string{other: lib.ReasonTargetNamespace, missing: lib.ReasonTargetNotFound, noContext: lib.ReasonContextNotFound} {
		g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))
		le := get(g, di)().Status.LastError
		g.Expect(le.Reason).To(Equal(reason))
		g.Expect(le.Message).To(Or(ContainSubstring("spec.target"), ContainSubstring("spec.context")))
		g.Expect(le.Codes).To(ConsistOf(lsv1alpha1.ErrorConfigurationProblem))
	}
	// A missing Context named "default" counts as empty.
	g.Eventually(get(g, defaultContext), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
}

// A deletion's deadline counts from the deletion's start, not from the last
// install job: an item whose last job is long past retries a transient
// deletion error, and fails (ERR_TIMEOUT) only once the deletion itself has
// run out of time - also when the deletion just stays pending.
func TestDeletionHasADeadlineOfItsOwn(t *testing.T) {
	for name, b := range map[string]*behaviour{
		"transient error": {deleteFail: errors.New("cluster unreachable")},
		"pending":         {deletePending: true},
	} {
		t.Run(name, func(t *testing.T) {
			ns, g := setup(t, b)
			ctx := context.Background()
			di := newItem(ns, "old")
			d := lsv1alpha1.Duration("3s")
			di.Spec.Timeout = &d
			g.Expect(env.Client.Create(ctx, di)).To(Succeed())
			g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
			// The last install job started an hour ago.
			longAgo := metav1.NewTime(time.Now().Add(-time.Hour))
			g.Expect(testutil.UpdateStatus(ctx, env.Client, get(g, di)(), func(cur *lsv1alpha1.DeployItem) {
				cur.Status.LastReconcileTime = &longAgo
			})).To(Succeed())

			deleteStarted := time.Now().Add(-time.Second) // the API server stores seconds
			g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
			// Still deleting (retrying, or waiting), with a fresh deadline.
			g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseDeleting),
				WithTransform(func(d *lsv1alpha1.DeployItem) time.Time { return d.Status.LastReconcileTime.Time }, BeTemporally(">=", deleteStarted.Truncate(time.Second)))))
			// Failed once the deletion's own 3 s are up.
			g.Eventually(get(g, di), timeout, interval).Should(phase(lsv1alpha1.PhaseFailed))
			le := get(g, di)().Status.LastError
			g.Expect(le.Operation).To(Equal(lib.OperationDelete))
			g.Expect(le.Codes).To(ContainElement(lsv1alpha1.ErrorTimeout))
			g.Expect(get(g, di)().Finalizers).To(ContainElement(lsv1alpha1.Finalizer), "a failed deletion keeps the finalizer")
			// Let the namespace go.
			rec.set(ns, &behaviour{})
			annotate(g, di, lsv1alpha1.DeleteWithoutUninstallAnnotation, "true")
		})
	}
}

func TestDeleteWithoutUninstallSkipsDelete(t *testing.T) {
	ns, g := setup(t, nil)
	ctx := context.Background()
	di := newItem(ns, "orphan")
	di.Annotations = map[string]string{lsv1alpha1.DeleteWithoutUninstallAnnotation: "true"}
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(di), &lsv1alpha1.DeployItem{}))
	}, timeout, interval).Should(BeTrue())
	for _, tr := range rec.Traces(ns, "orphan") {
		g.Expect(tr).NotTo(ContainSubstring(",Delete"))
	}
}

func TestNamespacesRestrictItems(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// The scoped namespace is fixed by the manager's options, so it outlives
	// one run of the test (go test -count=2); the item's name is unique instead.
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scopedNamespace}}))).To(Succeed())
	outside := testutil.Namespace(t, env)
	in, out := newItem(scopedNamespace, "in-"+outside), newItem(outside, "out")
	in.Spec.Type, out.Spec.Type = scopedType, scopedType
	g.Expect(env.Client.Create(ctx, in)).To(Succeed())
	g.Expect(env.Client.Create(ctx, out)).To(Succeed())
	g.Eventually(get(g, in), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), finished()))
	rv := get(g, out)().ResourceVersion
	g.Consistently(func() string { return get(g, out)().ResourceVersion }, time.Second, 100*time.Millisecond).Should(Equal(rv))
}

func TestRefusedStatusFailsTheJob(t *testing.T) {
	ns, g := setup(t, &behaviour{badStatus: true})
	di := newItem(ns, "refused")
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), finished()))
	le := get(g, di)().Status.LastError
	g.Expect(le.Reason).To(Equal(lib.ReasonStatusWriteFailed))
	g.Expect(le.Message).To(ContainSubstring("exportRef"))
	g.Expect(le.Codes).To(ConsistOf(lsv1alpha1.ErrorConfigurationProblem))
}

// TestFinalizerIsWrittenBeforeTheWork: when a job starts on an item without
// the deployer's finalizer, the finalizer is on the API server before the
// deployer's Reconcile runs, so a deletion at any later moment runs Delete
// (nothing the item deployed is left behind). No extra write: the metadata
// patch only moves ahead of the status write.
func TestFinalizerIsWrittenBeforeTheWork(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []bool
	)
	ns, g := setup(t, &behaviour{onReconcile: func(req *lib.Request) {
		live := &lsv1alpha1.DeployItem{}
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(req.Item), live)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, err == nil && slices.Contains(live.Finalizers, lsv1alpha1.Finalizer))
	}})
	di := newItem(ns, "fin")
	g.Expect(env.Client.Create(context.Background(), di)).To(Succeed())
	g.Eventually(get(g, di)).WithTimeout(timeout).WithPolling(interval).Should(settled())
	mu.Lock()
	defer mu.Unlock()
	g.Expect(seen).NotTo(BeEmpty())
	g.Expect(seen).To(HaveEach(BeTrue()), "the finalizer was not on the API server when Reconcile ran")
}
