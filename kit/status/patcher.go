package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/terrace-dev/terrace/kit/stale"
)

// Patcher writes one object's status once, at the end of a reconcile.
type Patcher struct {
	client     client.Client
	fieldOwner string
	writes     *stale.Versions
	apply      bool
	omit       []string

	key     types.NamespacedName
	before  map[string]any
	guarded bool
	// failed: a write of this reconcile failed; the object moved on and
	// nothing more is written.
	failed   bool
	onStored []func()
	after    []func(context.Context) error
}

// Option configures a Patcher.
type Option func(*Patcher)

// FieldOwner is the field manager of the status writes.
func FieldOwner(name string) Option { return func(p *Patcher) { p.fieldOwner = name } }

// RecordWrites records, in v, every resourceVersion the Patcher's writes
// replace: the stale-cache guard of the reconciler.
func RecordWrites(v *stale.Versions) Option { return func(p *Patcher) { p.writes = v } }

// Apply writes the status with server-side apply (force ownership) of the
// whole status, instead of a merge patch of the changed fields: the field
// owner then owns exactly the fields it sends. Use it where another
// controller writes other fields of the same status.
func Apply() Option { return func(p *Patcher) { p.apply = true } }

// Omit leaves the named top-level status fields out of the comparison and
// the write: another controller is their writer.
func Omit(fields ...string) Option {
	return func(p *Patcher) { p.omit = append(p.omit, fields...) }
}

// NewPatcher snapshots obj's status as the base of the reconcile's write.
func NewPatcher(c client.Client, obj client.Object, opts ...Option) (*Patcher, error) {
	p := &Patcher{client: c, key: client.ObjectKeyFromObject(obj)}
	for _, o := range opts {
		o(p)
	}
	before, err := p.statusOf(obj)
	if err != nil {
		return nil, err
	}
	p.before = before
	return p, nil
}

// Guard makes the status write conditional on the resourceVersion of the
// object as this reconcile knows it: a write computed from a stale copy
// (one that would start a second job) fails with a conflict instead.
func (p *Patcher) Guard() { p.guarded = true }

// OnStored queues f until the status of this reconcile is stored (or found
// unchanged): the Events and metrics of the transitions it holds.
func (p *Patcher) OnStored(f func()) { p.onStored = append(p.onStored, f) }

// AfterStored queues a write that must follow the status write, e.g. the
// removal of the annotation that started a job, so that it is never lost.
// It runs only after a successful status write; write it through Track.
func (p *Patcher) AfterStored(f func(context.Context) error) { p.after = append(p.after, f) }

// Failed reports whether a write of this reconcile failed (or Skip was
// called): Patch then writes nothing more.
func (p *Patcher) Failed() bool { return p.failed }

// Track runs write, a write of obj (its metadata) that updates obj from the
// response, and records the resourceVersion it replaced. A write that
// changed nothing keeps the version: nothing is recorded. A failed write
// does not stop the status write; call Skip for that.
func (p *Patcher) Track(obj client.Object, write func() error) error {
	before := obj.GetResourceVersion()
	err := write()
	p.replaced(before, obj.GetResourceVersion())
	return err
}

// Skip makes the end-of-reconcile Patch write nothing: the object moved on
// (an earlier write of this reconcile failed), or it is gone.
func (p *Patcher) Skip() { p.failed = true }

func (p *Patcher) replaced(before, now string) {
	if p.writes != nil && before != "" && now != before {
		p.writes.Replaced(p.key, before)
	}
}

// Changed reports whether obj's status differs from the snapshot.
func (p *Patcher) Changed(obj client.Object) (bool, error) {
	now, err := p.statusOf(obj)
	if err != nil {
		return false, err
	}
	patch, err := mergePatch(p.before, now)
	return len(patch) > 0, err
}

// Patch writes obj's status if it changed since the snapshot (or since the
// Patcher's last write, which becomes the new base), then runs the OnStored
// functions and the AfterStored writes. After a failed write of this
// reconcile it writes nothing.
func (p *Patcher) Patch(ctx context.Context, obj client.Object) error {
	if p.failed {
		return nil
	}
	err := p.write(ctx, obj)
	if err != nil {
		p.failed = true
		return err
	}
	// The status as stored is the base of any later Patch, which then sends
	// only what changes after this one.
	if p.before, err = p.statusOf(obj); err != nil {
		return err
	}
	stored, after := p.onStored, p.after
	p.onStored, p.after = nil, nil
	for _, f := range stored {
		f()
	}
	for _, f := range after {
		if err := f(ctx); err != nil {
			p.failed = true
			return err
		}
	}
	return nil
}

// Flush writes the status computed so far in the middle of a reconcile (a
// job's start, guarded) and makes it the new base; the guard is lifted.
func (p *Patcher) Flush(ctx context.Context, obj client.Object) error {
	if err := p.Patch(ctx, obj); err != nil {
		return err
	}
	p.guarded = false
	return nil
}

func (p *Patcher) write(ctx context.Context, obj client.Object) error {
	now, err := p.statusOf(obj)
	if err != nil {
		return err
	}
	patch, err := mergePatch(p.before, now)
	if err != nil || len(patch) == 0 {
		return err
	}
	rv := obj.GetResourceVersion()
	if p.apply {
		err = p.applyStatus(ctx, obj, now)
	} else {
		body := map[string]any{"status": patch}
		if p.guarded {
			body["metadata"] = map[string]any{"resourceVersion": rv}
		}
		var raw []byte
		if raw, err = json.Marshal(body); err == nil {
			err = p.client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, raw), p.ownerOpts()...)
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s status: %w", kindOf(p.client.Scheme(), obj), err)
	}
	p.replaced(rv, obj.GetResourceVersion())
	return nil
}

func (p *Patcher) applyStatus(ctx context.Context, obj client.Object, status map[string]any) error {
	gvk, err := apiutil.GVKForObject(obj, p.client.Scheme())
	if err != nil {
		return err
	}
	meta := map[string]any{"name": obj.GetName()}
	if obj.GetNamespace() != "" {
		meta["namespace"] = obj.GetNamespace()
	}
	if p.guarded {
		meta["resourceVersion"] = obj.GetResourceVersion()
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvk.GroupVersion().String(),
		"kind":       gvk.Kind,
		"metadata":   meta,
		"status":     withoutNulls(status),
	}}
	opts := []client.SubResourceApplyOption{client.ForceOwnership}
	if p.fieldOwner != "" {
		opts = append(opts, client.FieldOwner(p.fieldOwner))
	}
	if err := p.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
		return err
	}
	// The apply's response is unstructured: only the version is taken over.
	if rv := u.GetResourceVersion(); rv != "" {
		obj.SetResourceVersion(rv)
	}
	return nil
}

func (p *Patcher) ownerOpts() []client.SubResourcePatchOption {
	if p.fieldOwner == "" {
		return nil
	}
	return []client.SubResourcePatchOption{client.FieldOwner(p.fieldOwner)}
}

// statusOf is obj's status as JSON, without the omitted fields.
func (p *Patcher) statusOf(obj client.Object) (map[string]any, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var whole struct {
		Status map[string]any `json:"status"`
	}
	if err := json.Unmarshal(raw, &whole); err != nil {
		return nil, err
	}
	if whole.Status == nil {
		whole.Status = map[string]any{}
	}
	for _, f := range p.omit {
		delete(whole.Status, f)
	}
	return whole.Status, nil
}

// withoutNulls is m without its null values, at any depth: an apply states
// the whole status, so an unset field is one left out (a null, e.g. a zero
// metav1.Time, is refused by the schema where a string is due).
func withoutNulls(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if v = valueWithoutNulls(v); v != nil {
			out[k] = v
		}
	}
	return out
}

func valueWithoutNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return withoutNulls(v)
	case []any:
		out := make([]any, 0, len(v))
		for _, e := range v {
			if e = valueWithoutNulls(e); e != nil {
				out = append(out, e)
			}
		}
		return out
	default:
		return v
	}
}

// mergePatch is the JSON merge patch from a to b (RFC 7386), empty when they
// are equal.
func mergePatch(a, b map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for k, bv := range b {
		av, ok := a[k]
		if !ok {
			out[k] = bv
			continue
		}
		am, aIsMap := av.(map[string]any)
		bm, bIsMap := bv.(map[string]any)
		if aIsMap && bIsMap {
			sub, err := mergePatch(am, bm)
			if err != nil {
				return nil, err
			}
			if len(sub) > 0 {
				out[k] = sub
			}
			continue
		}
		if !jsonEqual(av, bv) {
			out[k] = bv
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out[k] = nil
		}
	}
	return out, nil
}

func jsonEqual(a, b any) bool {
	ra, errA := json.Marshal(a)
	rb, errB := json.Marshal(b)
	return errors.Join(errA, errB) == nil && string(ra) == string(rb)
}

func kindOf(scheme *runtime.Scheme, obj client.Object) string {
	if scheme != nil {
		if gvk, err := apiutil.GVKForObject(obj, scheme); err == nil {
			return gvk.Kind
		}
	}
	return fmt.Sprintf("%T", obj)
}
