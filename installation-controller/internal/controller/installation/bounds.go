package installation

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/kit/flow"
)

// lastError reasons of a bound (options.go) an installation hit.
const (
	// ReasonSubInstallationLimit: the blueprint renders sub-installations
	// deeper, more of them, or into a larger tree than the bounds allow.
	ReasonSubInstallationLimit = "SubInstallationLimitExceeded"
	// ReasonImportLimit: more imports, or more bytes of them, than allowed.
	ReasonImportLimit = "ImportLimitExceeded"
)

// RootLabel holds, on a sub-installation, the UID of its tree's root: the
// tree index counts a tree's installations from it.
const RootLabel = "installation.terrace.dev/root"

// TreeIndex is the field index of installations by the UID of their tree's
// root (their own for a root).
const TreeIndex = "terrace.dev/tree"

func indexTree(o client.Object) []string {
	inst, ok := o.(*lsv1alpha1.Installation)
	if !ok {
		return nil
	}
	if isRoot(inst) {
		return []string{string(inst.UID)}
	}
	if uid := inst.Labels[RootLabel]; uid != "" {
		return []string{uid}
	}
	return nil
}

// rootUID is the UID of the root of inst's tree ("" when its label is
// missing).
func rootUID(inst *lsv1alpha1.Installation) string {
	if isRoot(inst) {
		return string(inst.UID)
	}
	return inst.Labels[RootLabel]
}

// checkFanOut ends the job when the blueprint renders more sub-installations
// than one blueprint may have, or renders any at the deepest depth allowed.
func (r *Reconciler) checkFanOut(ctx context.Context, inst *lsv1alpha1.Installation, templates []blueprint.InstallationTemplate) error {
	b := r.Bounds
	if len(templates) == 0 {
		return nil
	}
	if len(templates) > b.MaxSubInstallationsPerBlueprint {
		return flow.Stalledf(ReasonSubInstallationLimit,
			"the blueprint renders %d sub-installations, more than %d, the bound of one blueprint (%s)",
			len(templates), b.MaxSubInstallationsPerBlueprint, FlagMaxSubInstallationsPerBlueprint)
	}
	depth, err := r.depthOf(ctx, inst)
	if err != nil {
		return err
	}
	if depth >= b.MaxSubInstallationDepth {
		return flow.Stalledf(ReasonSubInstallationLimit,
			"installation %s is at sub-installation depth %d and its blueprint renders %d sub-installation(s) (the first: %q): sub-installations nest at most %d levels deep under a root (%s)",
			inst.Name, depth, len(templates), templates[0].Name, b.MaxSubInstallationDepth, FlagMaxSubInstallationDepth)
	}
	return nil
}

// depthOf is how many parents inst has, read from the cache by walking its
// controller owners (at most MaxSubInstallationDepth of them: deeper is too
// deep). The owner references are the parents' own writes, so the depth
// holds whatever labels say; a parent already gone ends the walk.
func (r *Reconciler) depthOf(ctx context.Context, inst *lsv1alpha1.Installation) (int, error) {
	depth, cur := 0, inst
	for p := parentName(cur); p != "" && depth <= r.Bounds.MaxSubInstallationDepth; p = parentName(cur) {
		depth++
		next := &lsv1alpha1.Installation{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: p}, next); err != nil {
			return depth, client.IgnoreNotFound(err)
		}
		cur = next
	}
	return depth, nil
}

// checkTreeSize ends the job when creating adding more sub-installations
// would make the root's tree hold more installations than allowed. Counted
// in the cache's tree index, without copies.
func (r *Reconciler) checkTreeSize(ctx context.Context, inst *lsv1alpha1.Installation, adding int) error {
	root := rootUID(inst)
	if adding == 0 || root == "" {
		return nil
	}
	list := &lsv1alpha1.InstallationList{}
	if err := r.Client.List(ctx, list, client.InNamespace(inst.Namespace), client.MatchingFields{TreeIndex: root}, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("counting the installations of the tree: %w", err)
	}
	if have, bound := len(list.Items), r.Bounds.MaxInstallationsPerTree; have+adding > bound {
		return flow.Stalledf(ReasonSubInstallationLimit,
			"installation %s would create %d sub-installation(s) in a tree of %d installations, more than %d, the bound of one root's tree (%s)",
			inst.Name, adding, have, bound, FlagMaxInstallationsPerTree)
	}
	return nil
}

// checkImportCount ends the job of an installation with more imports than
// allowed, before any is read.
func (r *Reconciler) checkImportCount(inst *lsv1alpha1.Installation) error {
	// Each Target of a targetList or targetMap is a read of its own.
	n := len(inst.Spec.Imports.Data)
	for _, t := range inst.Spec.Imports.Targets {
		n += max(1, len(targetRefs(t)))
	}
	if n > r.Bounds.MaxImports {
		return flow.Stalledf(ReasonImportLimit, "the installation has %d imports (data and targets), more than %d, the bound of one installation (%s)",
			n, r.Bounds.MaxImports, FlagMaxImports)
	}
	return nil
}

// countImportBytes adds n bytes of the import what to im, and ends the job
// once all imports read hold more than allowed: no more are read.
func (r *Reconciler) countImportBytes(im *imports, what string, n int) error {
	im.bytes += int64(n)
	if im.bytes > r.Bounds.MaxImportBytes {
		return flow.Stalledf(ReasonImportLimit,
			"the imports hold more than %d bytes, the bound of one installation's imports (%s): %s brings them to %d bytes (an object imported several times counts each time)",
			r.Bounds.MaxImportBytes, FlagMaxImportBytes, what, im.bytes)
	}
	return nil
}

// importedBytes is the size of what an import of a Secret's or ConfigMap's
// key (all keys without one) holds.
func importedBytes(data map[string]string, key string) int {
	if key != "" {
		return len(data[key])
	}
	n := 0
	for k, v := range data {
		n += len(k) + len(v)
	}
	return n
}

type renderDeadlineKey struct{}

// withRenderDeadline gives ctx the reconcile's render deadline, which
// renderContext applies to every render and mapping (API requests keep
// their own timeouts).
func withRenderDeadline(ctx context.Context, d time.Time) context.Context {
	return context.WithValue(ctx, renderDeadlineKey{}, d)
}

// renderContext is ctx bounded by the reconcile's render deadline.
func renderContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Value(renderDeadlineKey{}).(time.Time); ok {
		return context.WithDeadline(ctx, d)
	}
	return context.WithCancel(ctx)
}
