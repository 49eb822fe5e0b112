package status_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	apisall "github.com/terrace-dev/terrace/apis/all"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/stale"
	"github.com/terrace-dev/terrace/kit/status"
	"github.com/terrace-dev/terrace/kit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := apisall.AddToScheme(scheme); err != nil {
		panic(err)
	}
	os.Exit(testenv.RunMain(m, scheme, &env))
}

const (
	ns    = "default"
	owner = "test-controller"
)

// request is one write a client sent to the API server.
type request struct {
	method, path, contentType string
	body                      map[string]any
}

// recorder keeps the writes (every request but reads) a client sends.
type recorder struct {
	mu     sync.Mutex
	writes []request
}

func (r *recorder) all() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.writes)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// recordingClient is a real client of the test API server whose writes are
// recorded on their way out.
func recordingClient(t *testing.T) (client.Client, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet {
				return next.RoundTrip(req)
			}
			w := request{method: req.Method, path: req.URL.Path, contentType: req.Header.Get("Content-Type")}
			if req.Body != nil {
				raw, err := io.ReadAll(req.Body)
				if err != nil {
					return nil, err
				}
				_ = req.Body.Close()
				req.Body = io.NopCloser(bytes.NewReader(raw))
				// An apply is YAML (here JSON, which YAML includes).
				if err := yaml.Unmarshal(raw, &w.body); err != nil {
					t.Errorf("decoding the body of %s %s: %v", w.method, w.path, err)
				}
			}
			rec.mu.Lock()
			rec.writes = append(rec.writes, w)
			rec.mu.Unlock()
			return next.RoundTrip(req)
		})
	})
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

// newInstallation creates an Installation with status st (written by the
// field manager "setup") and returns it as the server holds it.
func newInstallation(t *testing.T, name string, st lsv1alpha1.InstallationStatus) *lsv1alpha1.Installation {
	t.Helper()
	ctx := context.Background()
	inst := &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{
			Inline: &lsv1alpha1.InlineBlueprint{Filesystem: map[string]string{lsv1alpha1.BlueprintFileName: "{}"}},
		}},
	}
	if err := env.Client.Create(ctx, inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Client.Delete(ctx, inst); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleaning up: %v", err)
		}
	})
	inst.Status = st
	if err := env.Client.Status().Update(ctx, inst, client.FieldOwner("setup")); err != nil {
		t.Fatal(err)
	}
	return inst
}

func get[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	out := obj.DeepCopyObject().(T)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// mergeStatus writes fields of obj's status as field manager manager.
func mergeStatus(t *testing.T, obj client.Object, manager, patch string) {
	t.Helper()
	target := obj.DeepCopyObject().(client.Object)
	if err := env.Client.Status().Patch(context.Background(), target, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner(manager)); err != nil {
		t.Fatal(err)
	}
}

// touch changes obj on the server (a label), as another writer would.
func touch(t *testing.T, obj client.Object, value string) {
	t.Helper()
	target := obj.DeepCopyObject().(client.Object)
	patch := `{"metadata":{"labels":{"touched":"` + value + `"}}}`
	if err := env.Client.Patch(context.Background(), target, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// managedBy lists the status fields (f:name) field manager manager owns.
func managedBy(obj client.Object, manager string) []string {
	var fields []string
	for _, e := range obj.GetManagedFields() {
		if e.Manager != manager || e.Subresource != "status" || e.FieldsV1 == nil {
			continue
		}
		var set map[string]map[string]any
		if err := yaml.Unmarshal(e.FieldsV1.GetRawBytes(), &set); err != nil {
			continue
		}
		for f := range set["f:status"] {
			fields = append(fields, f)
		}
	}
	slices.Sort(fields)
	return fields
}

func statusBody(t *testing.T, w request) map[string]any {
	t.Helper()
	st, ok := w.body["status"].(map[string]any)
	if !ok {
		t.Fatalf("%s %s sent no status: %v", w.method, w.path, w.body)
	}
	return st
}

func keys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// TestPatchUnchangedSendsNothing: a reconcile that changes nothing in the
// status sends no request, with a merge patch or with apply; what waits for
// the status to be stored runs all the same.
func TestPatchUnchangedSendsNothing(t *testing.T) {
	ctx := context.Background()
	inst := newInstallation(t, "unchanged", lsv1alpha1.InstallationStatus{Phase: lsv1alpha1.PhaseInit, JobID: "j1"})
	for _, opts := range [][]status.Option{nil, {status.Apply()}} {
		c, rec := recordingClient(t)
		obj := get(t, inst)
		p, err := status.NewPatcher(c, obj, append(opts, status.FieldOwner(owner))...)
		if err != nil {
			t.Fatal(err)
		}
		stored := 0
		p.OnStored(func() { stored++ })
		// A change undone is no change.
		obj.Status.Phase = lsv1alpha1.PhaseProgressing
		obj.Status.Phase = lsv1alpha1.PhaseInit
		if changed, err := p.Changed(obj); err != nil || changed {
			t.Errorf("Changed = %v, %v; want false", changed, err)
		}
		if err := p.Patch(ctx, obj); err != nil {
			t.Fatal(err)
		}
		if w := rec.all(); len(w) != 0 {
			t.Errorf("an unchanged status sent %d requests: %+v", len(w), w)
		}
		if stored != 1 {
			t.Errorf("OnStored ran %d times, want once", stored)
		}
	}
}

// TestPatchSendsOnlyChangedFields: the merge patch carries the status fields
// the reconcile changed, nothing else, so a field another field manager
// wrote meanwhile is left as it is; a field set to nothing is removed. The
// write's replaced resourceVersion is recorded.
func TestPatchSendsOnlyChangedFields(t *testing.T) {
	ctx := context.Background()
	inst := newInstallation(t, "changed-fields", lsv1alpha1.InstallationStatus{
		Phase: lsv1alpha1.PhaseInit, ImportsHash: "h1",
		LastError: &lsv1alpha1.Error{Operation: "Init", Reason: "ImportNotFound", Message: "waiting"},
	})
	c, rec := recordingClient(t)
	var ownWrites stale.Versions
	obj := get(t, inst)
	read := obj.ResourceVersion
	p, err := status.NewPatcher(c, obj, status.FieldOwner(owner), status.RecordWrites(&ownWrites))
	if err != nil {
		t.Fatal(err)
	}
	mergeStatus(t, obj, "other", `{"status":{"importsHash":"h2"}}`)

	obj.Status.Phase = lsv1alpha1.PhaseProgressing
	obj.Status.LastError = nil
	status.SetReady(&obj.Status.Conditions, obj.Generation, metav1.ConditionFalse, "Progressing", "the job runs")
	if err := p.Patch(ctx, obj); err != nil {
		t.Fatal(err)
	}

	w := rec.all()
	if len(w) != 1 {
		t.Fatalf("sent %d requests, want 1: %+v", len(w), w)
	}
	if w[0].method != http.MethodPatch || !strings.HasSuffix(w[0].path, "/installations/changed-fields/status") ||
		w[0].contentType != string(types.MergePatchType) {
		t.Errorf("sent %s %s (%s), want a merge patch of the status", w[0].method, w[0].path, w[0].contentType)
	}
	if got := keys(w[0].body); !slices.Equal(got, []string{"status"}) {
		t.Errorf("the patch holds %v, want the status only (an unguarded write has no resourceVersion)", got)
	}
	body := statusBody(t, w[0])
	if got := keys(body); !slices.Equal(got, []string{"conditions", "lastError", "phase"}) {
		t.Errorf("the patch holds status fields %v, want the changed ones: conditions, lastError, phase", got)
	}
	if v, ok := body["lastError"]; !ok || v != nil {
		t.Errorf("the patch holds lastError %v, want null (removed)", v)
	}

	got := get(t, inst)
	if got.Status.ImportsHash != "h2" {
		t.Errorf("importsHash = %q, want h2, the other writer's", got.Status.ImportsHash)
	}
	if got.Status.Phase != lsv1alpha1.PhaseProgressing || got.Status.LastError != nil || !status.Has(got.Status.Conditions, status.ConditionReady, metav1.ConditionFalse, "Progressing", "the job runs") {
		t.Errorf("stored status %+v, want this reconcile's", got.Status)
	}
	if f := managedBy(got, "other"); !slices.Equal(f, []string{"f:importsHash"}) {
		t.Errorf("the other writer manages %v, want f:importsHash", f)
	}
	if f := managedBy(got, owner); slices.Contains(f, "f:importsHash") || !slices.Contains(f, "f:phase") {
		t.Errorf("%s manages %v, want phase and not importsHash", owner, f)
	}
	if !ownWrites.Stale(client.ObjectKeyFromObject(obj), read) {
		t.Errorf("the replaced resourceVersion %s is not recorded", read)
	}
	if obj.ResourceVersion != got.ResourceVersion || ownWrites.Stale(client.ObjectKeyFromObject(obj), got.ResourceVersion) {
		t.Errorf("obj at %s after the write, server at %s; the new version must not be recorded", obj.ResourceVersion, got.ResourceVersion)
	}
}

// TestGuardRefusesStaleWrite: a guarded write computed from a copy the
// object has moved on from fails with a conflict, stores nothing and reports
// nothing; the Patcher then writes nothing more. Unguarded, the same write
// goes through.
func TestGuardRefusesStaleWrite(t *testing.T) {
	ctx := context.Background()
	for _, apply := range []bool{false, true} {
		name := map[bool]string{false: "guard-merge", true: "guard-apply"}[apply]
		t.Run(name, func(t *testing.T) {
			inst := newInstallation(t, name, lsv1alpha1.InstallationStatus{Phase: lsv1alpha1.PhaseSucceeded, JobID: "j1", JobIDFinished: "j1"})
			c, rec := recordingClient(t)
			var ownWrites stale.Versions
			obj := get(t, inst)
			read := obj.ResourceVersion
			opts := []status.Option{status.FieldOwner(owner), status.RecordWrites(&ownWrites)}
			if apply {
				opts = append(opts, status.Apply())
			}
			p, err := status.NewPatcher(c, obj, opts...)
			if err != nil {
				t.Fatal(err)
			}
			p.Guard()
			reported := false
			p.OnStored(func() { reported = true })
			ran := false
			p.AfterStored(func(context.Context) error { ran = true; return nil })
			touch(t, inst, "1")

			obj.Status.JobID = "j2"
			obj.Status.Phase = lsv1alpha1.PhaseInit
			err = p.Patch(ctx, obj)
			if !apierrors.IsConflict(err) {
				t.Fatalf("a guarded write of a stale copy returned %v, want a conflict", err)
			}
			if reported || ran {
				t.Errorf("after a conflict: OnStored ran %v, AfterStored ran %v; want neither", reported, ran)
			}
			if !p.Failed() {
				t.Error("Failed() = false after a conflict")
			}
			if got := get(t, inst); got.Status.JobID != "j1" || got.Status.Phase != lsv1alpha1.PhaseSucceeded {
				t.Errorf("the stale write stored %+v", got.Status)
			}
			if ownWrites.Stale(client.ObjectKeyFromObject(obj), read) {
				t.Error("a refused write recorded a replaced version")
			}
			w := rec.all()
			if len(w) != 1 {
				t.Fatalf("sent %d requests, want 1", len(w))
			}
			meta, _ := w[0].body["metadata"].(map[string]any)
			if meta["resourceVersion"] != read {
				t.Errorf("the guarded write carries resourceVersion %v, want %s", meta["resourceVersion"], read)
			}
			if err := p.Patch(ctx, obj); err != nil || len(rec.all()) != 1 {
				t.Errorf("Patch after a failed write: %v, %d requests; want nothing", err, len(rec.all()))
			}

			// The same write, unguarded, from the same stale copy.
			obj = get(t, inst)
			p, err = status.NewPatcher(c, obj, opts...)
			if err != nil {
				t.Fatal(err)
			}
			touch(t, inst, "2")
			obj.Status.JobID = "j2"
			if err := p.Patch(ctx, obj); err != nil {
				t.Fatalf("an unguarded write: %v", err)
			}
			if got := get(t, inst); got.Status.JobID != "j2" {
				t.Errorf("jobID = %q, want j2", got.Status.JobID)
			}
		})
	}
}

// TestTrack: a metadata write through Track records the version it
// replaced; a write that changed nothing on the server records nothing; a
// failed one records nothing and does not stop the status write.
func TestTrack(t *testing.T) {
	ctx := context.Background()
	inst := newInstallation(t, "track", lsv1alpha1.InstallationStatus{Phase: lsv1alpha1.PhaseInit})
	c, rec := recordingClient(t)
	var ownWrites stale.Versions
	key := client.ObjectKeyFromObject(inst)
	obj := get(t, inst)
	p, err := status.NewPatcher(c, obj, status.FieldOwner(owner), status.RecordWrites(&ownWrites))
	if err != nil {
		t.Fatal(err)
	}

	before := obj.ResourceVersion
	annotate := []byte(`{"metadata":{"annotations":{"a":"b"}}}`)
	if err := p.Track(obj, func() error { return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, annotate)) }); err != nil {
		t.Fatal(err)
	}
	if obj.ResourceVersion == before || !ownWrites.Stale(key, before) {
		t.Errorf("a write from %s to %s: replaced version recorded %v", before, obj.ResourceVersion, ownWrites.Stale(key, before))
	}

	same := obj.ResourceVersion
	if err := p.Track(obj, func() error { return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, annotate)) }); err != nil {
		t.Fatal(err)
	}
	if len(rec.all()) != 2 {
		t.Fatalf("sent %d requests, want 2", len(rec.all()))
	}
	if obj.ResourceVersion != same || ownWrites.Stale(key, same) {
		t.Errorf("a write that changed nothing (version %s, now %s) recorded its version: %v", same, obj.ResourceVersion, ownWrites.Stale(key, same))
	}

	boom := errors.New("refused")
	if err := p.Track(obj, func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Track returned %v, want the write's error", err)
	}
	if ownWrites.Stale(key, same) || p.Failed() {
		t.Errorf("a failed write: recorded %v, Failed %v; want neither", ownWrites.Stale(key, same), p.Failed())
	}
	obj.Status.Phase = lsv1alpha1.PhaseProgressing
	if err := p.Patch(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if !ownWrites.Stale(key, same) {
		t.Error("the status write after Track did not record the version it replaced")
	}
}

// TestStoredHooks: OnStored functions run once the status is stored (they
// see it on the server), before the AfterStored writes, which follow the
// status write; each runs once. An AfterStored write that fails fails the
// Patch and ends the reconcile's writes.
func TestStoredHooks(t *testing.T) {
	ctx := context.Background()
	inst := newInstallation(t, "hooks", lsv1alpha1.InstallationStatus{Phase: lsv1alpha1.PhaseInit})
	touch(t, inst, "start")
	c, rec := recordingClient(t)
	var ownWrites stale.Versions
	key := client.ObjectKeyFromObject(inst)
	obj := get(t, inst)
	p, err := status.NewPatcher(c, obj, status.FieldOwner(owner), status.RecordWrites(&ownWrites))
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	p.OnStored(func() {
		order = append(order, "stored")
		if got := get(t, inst); got.Status.Phase != lsv1alpha1.PhaseProgressing {
			t.Errorf("OnStored ran while the server holds phase %s", got.Status.Phase)
		}
	})
	var afterStatus string
	p.AfterStored(func(ctx context.Context) error {
		order = append(order, "after")
		afterStatus = obj.ResourceVersion
		return p.Track(obj, func() error {
			return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":null}}}`)))
		})
	})
	if len(order) != 0 {
		t.Fatal("hooks ran before Patch")
	}
	read := obj.ResourceVersion
	obj.Status.Phase = lsv1alpha1.PhaseProgressing
	if err := p.Patch(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"stored", "after"}) {
		t.Errorf("ran %v, want stored, after", order)
	}
	w := rec.all()
	if len(w) != 2 || !strings.HasSuffix(w[0].path, "/status") || strings.HasSuffix(w[1].path, "/status") {
		t.Fatalf("sent %+v, want the status write, then the metadata write", w)
	}
	if !ownWrites.Stale(key, read) || !ownWrites.Stale(key, afterStatus) || ownWrites.Stale(key, obj.ResourceVersion) {
		t.Errorf("recorded: %s %v, %s %v, current %s %v; want both replaced versions, not the current one",
			read, ownWrites.Stale(key, read), afterStatus, ownWrites.Stale(key, afterStatus), obj.ResourceVersion, ownWrites.Stale(key, obj.ResourceVersion))
	}
	if got := get(t, inst); got.Labels["touched"] != "" {
		t.Errorf("the AfterStored write did not land: labels %v", got.Labels)
	}
	// Nothing runs twice.
	if err := p.Patch(ctx, obj); err != nil || len(order) != 2 || len(rec.all()) != 2 {
		t.Errorf("a second Patch: %v, ran %v, %d requests", err, order, len(rec.all()))
	}

	// A failing AfterStored write fails the Patch; nothing is written after it.
	obj = get(t, inst)
	p, err = status.NewPatcher(c, obj, status.FieldOwner(owner))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("refused")
	p.AfterStored(func(context.Context) error { return boom })
	obj.Status.Phase = lsv1alpha1.PhaseCompleting
	if err := p.Patch(ctx, obj); !errors.Is(err, boom) || !p.Failed() {
		t.Errorf("Patch = %v, Failed %v; want the AfterStored error, failed", err, p.Failed())
	}
	obj.Status.Phase = lsv1alpha1.PhaseSucceeded
	n := len(rec.all())
	if err := p.Patch(ctx, obj); err != nil || len(rec.all()) != n {
		t.Errorf("Patch after a failed AfterStored write: %v, %d requests more", err, len(rec.all())-n)
	}
}

// TestSkip: after Skip, Patch writes nothing and runs nothing.
func TestSkip(t *testing.T) {
	inst := newInstallation(t, "skip", lsv1alpha1.InstallationStatus{Phase: lsv1alpha1.PhaseInit})
	c, rec := recordingClient(t)
	obj := get(t, inst)
	p, err := status.NewPatcher(c, obj)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	p.OnStored(func() { ran = true })
	obj.Status.Phase = lsv1alpha1.PhaseProgressing
	p.Skip()
	if err := p.Patch(context.Background(), obj); err != nil || ran || len(rec.all()) != 0 {
		t.Errorf("Patch after Skip: %v, OnStored ran %v, %d requests", err, ran, len(rec.all()))
	}
}

// TestFlush: a mid-reconcile write (guarded, as a job's start is) becomes
// the new base: the end-of-reconcile Patch sends only what changed after it,
// unguarded.
func TestFlush(t *testing.T) {
	ctx := context.Background()
	inst := newInstallation(t, "flush", lsv1alpha1.InstallationStatus{Phase: lsv1alpha1.PhaseSucceeded, JobID: "j1", JobIDFinished: "j1"})
	c, rec := recordingClient(t)
	obj := get(t, inst)
	read := obj.ResourceVersion
	p, err := status.NewPatcher(c, obj, status.FieldOwner(owner))
	if err != nil {
		t.Fatal(err)
	}
	p.Guard()
	obj.Status.JobID = "j2"
	obj.Status.Phase = lsv1alpha1.PhaseInit
	if err := p.Flush(ctx, obj); err != nil {
		t.Fatal(err)
	}
	touch(t, inst, "between")
	obj.Status.Phase = lsv1alpha1.PhaseProgressing
	if err := p.Patch(ctx, obj); err != nil {
		t.Fatalf("the write after Flush: %v (the guard is lifted by Flush)", err)
	}

	w := rec.all()
	if len(w) != 2 {
		t.Fatalf("sent %d requests, want 2", len(w))
	}
	if meta, _ := w[0].body["metadata"].(map[string]any); meta["resourceVersion"] != read {
		t.Errorf("the flushed write carries resourceVersion %v, want %s (guarded)", meta["resourceVersion"], read)
	}
	if got := keys(statusBody(t, w[0])); !slices.Equal(got, []string{"jobID", "phase"}) {
		t.Errorf("the flushed write holds %v, want jobID, phase", got)
	}
	if _, guarded := w[1].body["metadata"]; guarded {
		t.Errorf("the write after Flush is guarded: %v", w[1].body)
	}
	if body := statusBody(t, w[1]); !slices.Equal(keys(body), []string{"phase"}) || body["phase"] != string(lsv1alpha1.PhaseProgressing) {
		t.Errorf("the write after Flush holds %v, want the phase only", body)
	}
	if got := get(t, inst); got.Status.JobID != "j2" || got.Status.Phase != lsv1alpha1.PhaseProgressing {
		t.Errorf("stored %+v", got.Status)
	}
}

// TestApplyOmit: with Apply, the status is written by server-side apply,
// owned by the field owner; Omit leaves a field to its other writer, who
// keeps it even when this reconcile's copy of it is stale. A field the owner
// applied before and now leaves out is removed.
func TestApplyOmit(t *testing.T) {
	ctx := context.Background()
	exec := &lsv1alpha1.Execution{ObjectMeta: metav1.ObjectMeta{Name: "apply-omit", Namespace: ns}}
	if err := env.Client.Create(ctx, exec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, exec) })
	const other = "installation-controller"
	// The other writer hands the job over as the installation controller
	// does: an apply of status.jobID alone.
	applyJobID := func(job string) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": lsv1alpha1.SchemeGroupVersion.String(),
			"kind":       "Execution",
			"metadata":   map[string]any{"name": exec.Name, "namespace": exec.Namespace},
			"status":     map[string]any{"jobID": job},
		}}
		if err := env.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(other), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
	}
	applyJobID("j1")

	c, rec := recordingClient(t)
	var ownWrites stale.Versions
	obj := get(t, exec)
	newPatcher := func() *status.Patcher {
		t.Helper()
		p, err := status.NewPatcher(c, obj, status.FieldOwner(owner), status.RecordWrites(&ownWrites), status.Apply(), status.Omit("jobID"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := newPatcher()
	applyJobID("j2") // after this reconcile read j1

	read := obj.ResourceVersion
	obj.Status.JobID = "local" // omitted: neither compared nor written
	if changed, err := p.Changed(obj); err != nil || changed {
		t.Errorf("Changed = %v, %v after changing an omitted field only; want false", changed, err)
	}
	obj.Status.Phase = lsv1alpha1.PhaseProgressing
	obj.Status.LastError = &lsv1alpha1.Error{Operation: "Reconcile", Reason: "DeployItemFailed", Message: "m"}
	if err := p.Patch(ctx, obj); err != nil {
		t.Fatal(err)
	}
	w := rec.all()
	if len(w) != 1 || w[0].contentType != string(types.ApplyPatchType) || !strings.HasSuffix(w[0].path, "/executions/apply-omit/status") {
		t.Fatalf("sent %+v, want one apply of the status", w)
	}
	if _, ok := statusBody(t, w[0])["jobID"]; ok {
		t.Errorf("the apply holds the omitted jobID: %v", w[0].body)
	}
	got := get(t, exec)
	if got.Status.JobID != "j2" || got.Status.Phase != lsv1alpha1.PhaseProgressing || got.Status.LastError == nil {
		t.Errorf("stored %+v; want jobID j2 (the other writer's), phase and lastError this reconcile's", got.Status)
	}
	if f := managedBy(got, other); !slices.Equal(f, []string{"f:jobID"}) {
		t.Errorf("%s manages %v, want f:jobID", other, f)
	}
	if obj.ResourceVersion != got.ResourceVersion || !ownWrites.Stale(client.ObjectKeyFromObject(obj), read) {
		t.Errorf("after the apply: obj at %s, server at %s, replaced %s recorded %v",
			obj.ResourceVersion, got.ResourceVersion, read, ownWrites.Stale(client.ObjectKeyFromObject(obj), read))
	}

	// The next reconcile clears lastError: the apply leaves it out, and the
	// server drops it, as its owner leaves it out.
	obj = get(t, exec)
	p = newPatcher()
	obj.Status.LastError = nil
	if err := p.Patch(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if got := get(t, exec); got.Status.LastError != nil || got.Status.JobID != "j2" || got.Status.Phase != lsv1alpha1.PhaseProgressing {
		t.Errorf("stored %+v; want lastError gone, jobID and phase kept", got.Status)
	}
}
