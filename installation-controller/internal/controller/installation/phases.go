package installation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/installation-controller/internal/mapping"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// phaseInit reads the blueprint and imports, checks the predecessors, and
// templates and creates the sub-objects; orphaned sub-installations are
// marked and deleted (their deletion runs in CleanupOrphaned).
func (r *Reconciler) phaseInit(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	inst := s.inst
	if inst.DeletionTimestamp != nil {
		// Deleted since the job started (Init runs again after each wait,
		// say for predecessors): the deletion job follows and deletes
		// whatever Init would create or update now, so nothing is written.
		return "", initWhileDeleting(r.deletionFollows(ctx, inst))
	}
	bp, err := parseBlueprint(inst)
	if err != nil {
		return "", err
	}
	msg, err := r.checkPredecessors(ctx, inst)
	if s.interrupted {
		// Interrupted before this job was handed to any sub-object (or
		// while waiting for them): nothing else would end the job, and a
		// deletion waits for it (seed 002: a running job can be
		// interrupted).
		why := "the job was interrupted in phase Init"
		if err == nil && msg != "" {
			why += " while waiting for " + msg
		}
		return "", jobEnds(lsv1alpha1.ReasonInterrupted, lsv1alpha1.ErrorInterrupted, errors.New(why))
	}
	if err != nil || msg != "" {
		if err != nil {
			return "", err
		}
		return "", waitf("%s", msg)
	}
	im, err := r.resolveImports(ctx, inst, bp, fromAPIServer)
	if err != nil {
		return "", err
	}
	inst.Status.ImportsHash = im.hash

	values := map[string]any{
		"imports":      im.values,
		"context":      im.configurations,
		"installation": map[string]any{"name": inst.Name, "namespace": inst.Namespace},
	}
	items, err := bp.DeployItems(values, im.targetNames)
	if err != nil {
		return "", templateFailure(err)
	}
	templates, err := bp.SubinstallationTemplates(values)
	if err != nil {
		return "", templateFailure(err)
	}
	if err := blueprint.CheckSubinstallationImports(templates, im.dataImportNames(), im.targetImportNames()); err != nil {
		return "", templateFailure(err)
	}

	if err := r.syncExecution(ctx, s, items); err != nil {
		return "", err
	}
	if err := r.syncSubInstallations(ctx, s, bp, templates); err != nil {
		return "", err
	}
	// The context copies come after the sub-installations are re-templated:
	// a value a sub-installation exported in the last job and this
	// installation now imports is then no longer that sub-installation's
	// export, and its object moves to this installation (claim) instead of
	// conflicting in every job.
	keep := sets.New[string]()
	if len(templates) > 0 {
		// Sub-installations read the parent's imports from its context.
		if err := r.writeContextImports(ctx, s, im); err != nil {
			return "", err
		}
		keep = contextCopyKeys(inst, im)
	}
	// Copies of data imports this installation no longer has (or all of
	// them, with no sub-installations left) go now, before any
	// sub-installation gets the job: a value that moved from this
	// installation's imports to a sub-installation's exports is then free for
	// that sub-installation to write, and no sub-installation reads a copy
	// nobody maintains. The sub-installations are idle (the last job
	// finished) and re-templated. Stale Target copies wait for Completing
	// (see writtenDataCopies).
	if err := r.deleteStale(ctx, inst, writtenDataCopies, keep); err != nil {
		return "", err
	}
	if len(s.handDeleted) > 0 || len(s.orphansGoing) > 0 {
		return "", waitf("%s", goneWaitMessage(s.handDeleted, s.orphansGoing))
	}
	return lsv1alpha1.PhaseCleanupOrphaned, nil
}

// goneWaitMessage says what Init waits for when sub-objects it handed their
// deletion are on their way out: those deleted by hand are created again
// once gone; orphans (deleted by this job's Init before it waited for
// something else) are not.
func goneWaitMessage(handDeleted, orphans []string) string {
	var parts []string
	if len(handDeleted) > 0 {
		parts = append(parts, strings.Join(handDeleted, ", ")+", deleted by hand, to be gone before they are created again")
	}
	if len(orphans) > 0 {
		parts = append(parts, strings.Join(orphans, ", ")+", deleted and no longer rendered by the blueprint, to be gone (they are not created again)")
	}
	return strings.Join(parts, "; and ")
}

// templateFailure ends the job: a template that does not render fails the
// same way on every retry. The message (from package tmpl) names the
// execution, the file and line, and quotes the offending snippet.
func templateFailure(err error) error {
	return flow.StalledError(ReasonTemplateFailed, err)
}

// checkPredecessors returns a wait message while a predecessor (a sibling
// exporting something this installation imports) has not finished the job,
// and a stalled error when one finished without success.
func (r *Reconciler) checkPredecessors(ctx context.Context, inst *lsv1alpha1.Installation) (string, error) {
	preds, err := r.listByIndex(ctx, inst.Namespace, ExportsIndex, importKeys(inst), inst.Name)
	if err != nil {
		return "", err
	}
	root := isRoot(inst)
	var waiting []string
	for _, p := range preds {
		if parentName(p) != parentName(inst) {
			continue
		}
		finished := finishedWith(p.Status.JobIDFinished, inst.Status.JobID)
		if root {
			// Root installations run their own jobs: a predecessor must not
			// be in the middle of one.
			finished = p.Status.JobID == p.Status.JobIDFinished && p.Status.JobID != ""
		}
		if !finished {
			waiting = append(waiting, p.Name)
			continue
		}
		if p.Status.Phase != lsv1alpha1.PhaseSucceeded {
			return "", flow.Stalledf(ReasonPredecessorFailed, "predecessor %s (which exports an import of this installation) ended %s", p.Name, p.Status.Phase)
		}
	}
	if len(waiting) > 0 {
		return "predecessors " + strings.Join(waiting, ", ") + " to finish", nil
	}
	return "", nil
}

func (r *Reconciler) listByIndex(ctx context.Context, ns, index string, keys []string, except string) ([]*lsv1alpha1.Installation, error) {
	seen := map[string]bool{}
	var out []*lsv1alpha1.Installation
	for _, k := range keys {
		list := &lsv1alpha1.InstallationList{}
		if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingFields{index: k}); err != nil {
			return nil, fmt.Errorf("listing installations by %s: %w", index, err)
		}
		for i := range list.Items {
			it := &list.Items[i]
			if it.Name != except && !seen[it.Name] {
				seen[it.Name] = true
				out = append(out, it)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ReasonExportConflict fails a job whose export or context copy names a
// DataObject or Target that exists but belongs to someone else.
const ReasonExportConflict = "ExportConflict"

// writeContextImports writes the installation's imports into its own context
// (DataObjects and Targets named "<installation>.<import>") for its
// sub-installations.
func (r *Reconciler) writeContextImports(ctx context.Context, s *scope, im *imports) error {
	inst := s.inst
	for name, v := range im.values {
		if _, isTarget := im.targets[name]; isTarget {
			continue
		}
		w := contextWrite{scope: inst.Name, ref: name, what: fmt.Sprintf("context copy of import %q", name), invalid: ReasonImportInvalid, fresh: s.fresh}
		if err := r.writeDataObject(ctx, inst, w, v); err != nil {
			return err
		}
	}
	for name, t := range im.targets {
		w := contextWrite{scope: inst.Name, ref: name, what: fmt.Sprintf("context copy of target import %q", name), invalid: ReasonImportInvalid, fresh: s.fresh}
		if err := r.writeTarget(ctx, inst, w, t.Spec); err != nil {
			return err
		}
	}
	return nil
}

// contextWrite says which DataObject or Target an export or context copy
// writes: value ref in context scope (scope "" for a root's exports), what
// it is (for messages) and the reason when the API server refuses it.
type contextWrite struct {
	scope, ref, what, invalid string
	// fresh holds the sub-installations this reconcile wrote (scope.fresh):
	// an owner of the object re-templated a moment ago is judged by the spec
	// it has now, not by a cache that may still show the old one.
	fresh map[string]client.Object
}

// checkName refuses, before any request, a name the API server would
// refuse (Invalid): retrying would never help.
func (w contextWrite) checkName(kind, name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return jobEndsf(w.invalid, lsv1alpha1.ErrorConfigurationProblem, "%s: %q is not a valid %s name: %s", w.what, name, kind, strings.Join(errs, "; "))
	}
	return nil
}

// ReasonDeletedDuringJob fails the install job of an installation being
// deleted that runs Init (again, after a wait) or Completing, or reaches a
// write of its exports or context copies.
const ReasonDeletedDuringJob = "DeletedDuringJob"

// initWhileDeleting ends the job of an installation being deleted that
// (re)enters Init: it creates or updates no execution, sub-installation or
// context copy, before any request. A running install job is finished before
// the deletion job starts (seed 002), but what it would write now outlives
// the installation's decision to go, say an export deleted meanwhile (by
// hand, or by a foreground deletion) created again, which successors would
// read as current. Init and Completing are the only phases that write
// context copies and exports, and both end such a job at their start.
// follows is deletionFollows.
func initWhileDeleting(follows string) error {
	return jobEndsf(ReasonDeletedDuringJob, lsv1alpha1.ErrorForInfoOnly,
		"the installation is being deleted: its execution, sub-installations and context copies are not written; the job ends in phase Init%s", follows)
}

// completingWhileDeleting ends the job of an installation being deleted
// that reached Completing: its exports are not written (see
// initWhileDeleting), and the message names them. follows is
// deletionFollows.
func completingWhileDeleting(inst *lsv1alpha1.Installation, follows string) error {
	var what []string
	for _, d := range inst.Spec.Exports.Data {
		what = append(what, dataExportWhat(d))
	}
	for _, t := range inst.Spec.Exports.Targets {
		what = append(what, targetExportWhat(t))
	}
	msg := "the installation is being deleted: "
	switch len(what) {
	case 0:
		msg += "the job ends in phase Completing"
	case 1:
		msg += what[0] + " is not written; the job ends here"
	default:
		msg += strings.Join(what[:len(what)-1], ", ") + " and " + what[len(what)-1] + " are not written; the job ends here"
	}
	return jobEndsf(ReasonDeletedDuringJob, lsv1alpha1.ErrorForInfoOnly, "%s%s", msg, follows)
}

// maxParentWalk bounds how far deletionFollows walks up the tree for the
// root's name (deeper than any tree the nesting limit lets a blueprint
// build; beyond it the root goes unnamed).
const maxParentWalk = 64

// deletionFollows ends a DeletedDuringJob message with who runs the
// deletion. A root, or a sub-installation whose parent is gone or being
// deleted, runs (or is handed) its deletion job when this job ended. A
// sub-installation deleted by hand under a parent that stays does not: its
// deletion runs in its parent's next job, which creates it again while the
// blueprint renders it, and for a root parent only the reconcile annotation
// starts that job. Saying "the deletion job follows" there left the user
// waiting on a `kubectl delete` that hangs. The parents are read from the
// cache (no request); one that cannot be read leaves the root unnamed.
func (r *Reconciler) deletionFollows(ctx context.Context, inst *lsv1alpha1.Installation) string {
	const follows = " and the deletion job follows"
	parent := parentName(inst)
	if parent == "" {
		return follows
	}
	root := ""
	cur := inst
	for range maxParentWalk {
		name := parentName(cur)
		if name == "" {
			root = cur.Name
			break
		}
		p := &lsv1alpha1.Installation{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: name}, p)
		if cur == inst && (apierrors.IsNotFound(err) ||
			(err == nil && (p.UID != metav1.GetControllerOf(inst).UID || p.DeletionTimestamp != nil))) {
			// Its parent is gone (or is another object of that name), and
			// its own deletion job runs; or the parent's deletion job hands
			// this one its deletion.
			return follows
		}
		if err != nil {
			break
		}
		cur = p
	}
	annotate := fmt.Sprintf("add the %s=%s annotation to the root installation", lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile)
	if root != "" {
		annotate += " " + root
	}
	return fmt.Sprintf("; no deletion job follows on its own: its deletion runs in the next job of its parent %s "+
		"(which creates it again while the blueprint renders it): %s", parent, annotate)
}

// writeError classifies a failed create or update: the API server refusing
// the object (Invalid) never goes away by retrying; the rest is retried
// (AlreadyExists included: the next attempt reads the object and decides
// by its owner).
func (w contextWrite) writeError(op, kind, name string, err error) error {
	if apierrors.IsInvalid(err) {
		return jobEnds(w.invalid, lsv1alpha1.ErrorConfigurationProblem, fmt.Errorf("%s: the API server refuses %s %s: %w", w.what, kind, name, err))
	}
	return fmt.Errorf("%s %s %s: %w", op, kind, name, err)
}

// claim decides whether inst may write the existing obj and makes inst its
// controller. An export or context copy belongs to the installation that
// writes it (for a sub-installation's export: the sub-installation, so two
// siblings exporting one name conflict): anything else (a user's object,
// another installation's) is never overwritten nor adopted, which would hand
// its content and its life (garbage collection with the owner) to inst.
// Objects written before exports had a controller carry inst as their only
// kind of owner (a plain owner reference): those are ours and get inst as
// controller, never a second owner.
func (r *Reconciler) claim(ctx context.Context, inst *lsv1alpha1.Installation, w contextWrite, kind string, obj client.Object) error {
	if isOwnedBy(obj, inst) {
		return nil
	}
	ctrl := metav1.GetControllerOf(obj)
	switch {
	case ctrl != nil && isInstallationRef(*ctrl, inst.Name), ctrl == nil && hasOwner(obj, inst):
		// Ours from before: an earlier incarnation of this installation
		// (same name, deleted and created again: garbage collection has not
		// caught up), or a plain owner reference from before exports had a
		// controller. The reference to inst replaces it.
		return controllerutil.SetControllerReference(inst, obj, r.Client.Scheme())
	}
	// An object on its way out (deleted, or its controlling installation
	// gone and garbage collection about to delete it) frees the name: the
	// job waits for it to go (nameTaken: no error), and its deletion wakes
	// the job (nameWaits). Only this rare path reads more (from the cache).
	if obj.GetDeletionTimestamp() != nil {
		return nameTaken(w, kind, obj, "it is being deleted")
	}
	if ctrl != nil && isInstallationRef(*ctrl, ctrl.Name) {
		owner, fresh := w.fresh["Installation/"+ctrl.Name].(*lsv1alpha1.Installation)
		var err error
		if !fresh {
			owner = &lsv1alpha1.Installation{}
			err = r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ctrl.Name}, owner)
		}
		switch {
		case apierrors.IsNotFound(err) || (err == nil && owner.UID != ctrl.UID):
			return nameTaken(w, kind, obj, fmt.Sprintf("it belongs to installation %s, which is gone: garbage collection deletes it", ctrl.Name))
		case err != nil:
			return fmt.Errorf("reading installation %s, owner of %s %s: %w", ctrl.Name, kind, obj.GetName(), err)
		case noLongerExportedBy(owner, kind, obj), w.scope == owner.Name && noLongerImportedBy(owner, obj):
			// Its writer's spec renamed or dropped this export (the writer's
			// next completed job would delete it, see deleteStale): the
			// name is free, and the export moves to inst. Without this, an
			// export moved to a sibling that the old writer waits for
			// would conflict in every job. Likewise a context copy of an
			// import its parent no longer has, written into that parent's
			// context by one of its sub-installations (the value moved from
			// the parent's imports to a child's exports): the parent's Init
			// deletes such a data copy before its children get the job (only
			// a cache that has not seen the deletion yet still shows it),
			// but keeps a Target copy until the job completes.
			obj.SetOwnerReferences(slices.DeleteFunc(obj.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return ref.UID == owner.UID }))
			return controllerutil.SetControllerReference(inst, obj, r.Client.Scheme())
		}
	}
	return flow.Stalledf(ReasonExportConflict,
		"%s: %s %s/%s exists and %s; it is left untouched (export to another name or remove that object)",
		w.what, kind, obj.GetNamespace(), obj.GetName(), ownerDescription(obj))
}

// noLongerExportedBy reports whether obj, controlled by owner, is an export
// of owner (not a context copy of its imports) under a name owner's spec no
// longer exports.
func noLongerExportedBy(owner *lsv1alpha1.Installation, kind string, obj client.Object) bool {
	if obj.GetLabels()[ContextLabel] == labelValue(owner.Name) || obj.GetAnnotations()[KeyAnnotation] == "" {
		return false
	}
	key := dataKey(obj.GetName())
	if kind == "Target" {
		key = targetKey(obj.GetName())
	}
	return !slices.Contains(exportKeys(owner), key)
}

// noLongerImportedBy reports whether obj is a context copy owner wrote of an
// import (its key) that owner's spec no longer has: not among its spec's
// data and target imports, its import data mappings, nor its blueprint's
// imports (which defaults fill). A blueprint that does not parse frees
// nothing.
func noLongerImportedBy(owner *lsv1alpha1.Installation, obj client.Object) bool {
	key := obj.GetAnnotations()[KeyAnnotation]
	if obj.GetLabels()[ContextLabel] != labelValue(owner.Name) || key == "" || owner.Spec.Blueprint.Inline == nil {
		return false
	}
	bp, err := blueprint.Parse(owner.Spec.Blueprint.Inline.Filesystem)
	if err != nil {
		return false
	}
	names := sets.New[string]()
	for _, d := range owner.Spec.Imports.Data {
		names.Insert(d.Name)
	}
	for _, t := range owner.Spec.Imports.Targets {
		names.Insert(t.Name)
	}
	for k := range owner.Spec.ImportDataMappings {
		names.Insert(k)
	}
	for _, d := range bp.Imports {
		names.Insert(d.Name)
	}
	return !names.Has(key)
}

// hasOwner reports whether owner (or an earlier incarnation of the same
// name) is among obj's owner references.
func hasOwner(obj client.Object, owner *lsv1alpha1.Installation) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == owner.UID || isInstallationRef(ref, owner.Name) {
			return true
		}
	}
	return false
}

// isInstallationRef reports whether ref names the installation called name
// (in the object's namespace: owner references never cross namespaces).
func isInstallationRef(ref metav1.OwnerReference, name string) bool {
	return ref.Kind == "Installation" && strings.HasPrefix(ref.APIVersion, lsv1alpha1.GroupName+"/") && ref.Name == name
}

// ownerDescription says who an object belongs to, for conflict messages.
func ownerDescription(obj client.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return fmt.Sprintf("belongs to %s %s", ref.Kind, ref.Name)
	}
	refs := obj.GetOwnerReferences()
	if len(refs) == 0 {
		return "was not created by Terrace"
	}
	names := make([]string, 0, len(refs))
	for _, ref := range refs {
		names = append(names, ref.Kind+" "+ref.Name)
	}
	return "is owned by " + strings.Join(names, ", ")
}

// writeDataObject creates or updates the DataObject w names, controlled by
// inst; no write when unchanged, nor when it belongs to someone else
// (ExportConflict).
func (r *Reconciler) writeDataObject(ctx context.Context, inst *lsv1alpha1.Installation, w contextWrite, value any) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", w.ref, err)
	}
	do := &lsv1alpha1.DataObject{}
	do.Name, do.Namespace = ScopedName(w.scope, w.ref), inst.Namespace
	if err := w.checkName("DataObject", do.Name); err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(do)
	if err := r.Client.Get(ctx, key, do); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		do.Data = lsv1alpha1.NewAnyJSON(raw)
		setContextMeta(do, w.scope, w.ref)
		if err := controllerutil.SetControllerReference(inst, do, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, do, client.FieldOwner(FieldManager)); err != nil {
			return w.writeError("creating", "DataObject", do.Name, err)
		}
		return nil
	}
	before := do.DeepCopy()
	if err := r.claim(ctx, inst, w, "DataObject", do); err != nil {
		return err
	}
	do.Data = lsv1alpha1.NewAnyJSON(raw)
	setContextMeta(do, w.scope, w.ref)
	if jsonEqual(before.Data.RawMessage, raw) && equality.Semantic.DeepEqual(before.ObjectMeta, do.ObjectMeta) {
		return nil
	}
	// The resourceVersion precondition keeps the ownership decision true
	// at the write: an object someone replaced meanwhile is a conflict,
	// retried with a fresh read.
	if err := r.Client.Patch(ctx, do, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager)); err != nil {
		return w.writeError("updating", "DataObject", do.Name, err)
	}
	return nil
}

// writeTarget is writeDataObject for Targets.
func (r *Reconciler) writeTarget(ctx context.Context, inst *lsv1alpha1.Installation, w contextWrite, spec lsv1alpha1.TargetSpec) error {
	t := &lsv1alpha1.Target{}
	t.Name, t.Namespace = ScopedName(w.scope, w.ref), inst.Namespace
	if err := w.checkName("Target", t.Name); err != nil {
		return err
	}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(t), t); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		t.Spec = spec
		setContextMeta(t, w.scope, w.ref)
		if err := controllerutil.SetControllerReference(inst, t, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, t, client.FieldOwner(FieldManager)); err != nil {
			return w.writeError("creating", "Target", t.Name, err)
		}
		return nil
	}
	before := t.DeepCopy()
	if err := r.claim(ctx, inst, w, "Target", t); err != nil {
		return err
	}
	t.Spec = spec
	setContextMeta(t, w.scope, w.ref)
	if equality.Semantic.DeepEqual(before, t) {
		return nil
	}
	if err := r.Client.Patch(ctx, t, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager)); err != nil {
		return w.writeError("updating", "Target", t.Name, err)
	}
	return nil
}

func setContextMeta(o client.Object, scope, ref string) {
	if scope != "" {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[ContextLabel] = labelValue(scope)
		o.SetLabels(l)
	}
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[KeyAnnotation] = ref
	o.SetAnnotations(a)
}

func jsonEqual(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return equality.Semantic.DeepEqual(va, vb)
}

// syncExecution creates or updates the installation's execution (without a
// job: that is handed over in ObjectsCreated).
func (r *Reconciler) syncExecution(ctx context.Context, s *scope, items []lsv1alpha1.DeployItemTemplate) error {
	inst := s.inst
	exec := &lsv1alpha1.Execution{}
	exec.Name, exec.Namespace = executionName(inst), inst.Namespace
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(exec), exec)
	switch {
	case apierrors.IsNotFound(err):
		if len(items) == 0 {
			inst.Status.ExecutionReference = nil
			return nil
		}
		exec.Labels = map[string]string{lsv1alpha1.EncompassedByLabel: labelValue(inst.Name)}
		// Created in the job's trace (no annotation while tracing is off).
		exec.Annotations = tracing.Inject(ctx, nil)
		// Created with the execution controller's finalizer (the same one),
		// which it then does not need to add in a write of its own.
		exec.Finalizers = []string{lsv1alpha1.Finalizer}
		exec.Spec = lsv1alpha1.ExecutionSpec{Context: inst.Spec.Context, DeployItems: items}
		if err := controllerutil.SetControllerReference(inst, exec, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, exec, client.FieldOwner(FieldManager)); err != nil {
			return subObjectWriteError(ctx, r.Client, inst, exec, "creating execution", err)
		}
		s.remember(exec)
	case err != nil:
		return fmt.Errorf("reading execution: %w", err)
	default:
		if !isOwnedBy(exec, inst) {
			return flow.Stalledf(ReasonTemplateFailed, "execution %s exists but does not belong to this installation", exec.Name)
		}
		if exec.DeletionTimestamp != nil {
			// With no deploy items, it is the orphan this job's Init
			// deleted before it waited (or one deleted by hand meanwhile):
			// it goes, and is not created again.
			return r.takeOverHandDeletion(ctx, s, exec, len(items) == 0)
		}
		if len(items) == 0 {
			// The blueprint no longer renders deploy items: the execution is
			// an orphan; its deletion runs in CleanupOrphaned, in this job's
			// trace (handed over first, only while tracing is on).
			s.deleted = true
			gone, err := prepareDeletion(ctx, r.Client, exec, nil)
			if err != nil {
				return err
			}
			if !gone {
				if err := r.Client.Delete(ctx, exec); client.IgnoreNotFound(err) != nil {
					return fmt.Errorf("deleting orphaned execution: %w", err)
				}
			}
			inst.Status.ExecutionReference = nil
			return nil
		}
		before := exec.DeepCopy()
		exec.Spec = lsv1alpha1.ExecutionSpec{Context: inst.Spec.Context, DeployItems: items}
		if !equality.Semantic.DeepEqual(before.Spec, exec.Spec) {
			if err := r.Client.Patch(ctx, exec, client.MergeFrom(before), client.FieldOwner(FieldManager)); err != nil {
				return subObjectWriteError(ctx, r.Client, inst, exec, "updating execution", err)
			}
			s.remember(exec)
		}
	}
	inst.Status.ExecutionReference = &lsv1alpha1.ObjectReference{Name: exec.Name, Namespace: exec.Namespace}
	return nil
}

// takeOverHandDeletion runs the deletion of a sub-object this job renders
// but finds being deleted. The installation deletes only orphans (what no
// template renders) and only inside its own jobs, so someone deleted it by
// hand; its deletion waits for a job from its parent, which no one else
// hands over. This job hands over its own and Init waits (s.handDeleted)
// until the object is gone: the owner watch then wakes Init, which creates
// it again. A deletion that failed fails the job; the next job retries it.
// An orphan (obj is no longer rendered) found on its way out in a later
// reconcile of Init, after a wait, is taken over the same way, but the
// messages say it is not created again.
func (r *Reconciler) takeOverHandDeletion(ctx context.Context, s *scope, obj client.Object, orphan bool) error {
	// A sub-installation's siblings that import from it are not deleted:
	// marked like an orphan, it does not wait for them (they would wait in
	// turn for this job, which waits for it). They get the job once it is back.
	if sub, ok := obj.(*lsv1alpha1.Installation); ok && sub.Annotations[lsv1alpha1.DeleteIgnoreSuccessorsAnnotation] != "true" {
		yes := "true"
		if err := patchAnnotations(ctx, r.Client, sub, map[string]*string{lsv1alpha1.DeleteIgnoreSuccessorsAnnotation: &yes}); err != nil {
			return err
		}
	}
	failed, err := r.handOverDeletion(ctx, s, obj)
	if err != nil {
		return err
	}
	what := kindOf(obj) + " " + obj.GetName()
	if failed != nil {
		return jobEndsf(ReasonDeleteFailed, lsv1alpha1.ErrorInternalProblem, "%s", handDeletionFailedMessage(what, orphan, *failed))
	}
	if orphan {
		s.orphansGoing = append(s.orphansGoing, what)
	} else {
		s.handDeleted = append(s.handDeleted, what)
	}
	return nil
}

// handDeletionFailedMessage is the lastError message of a job whose
// sub-object deleted by hand (what) ended its deletion failed: the
// sub-object's own cause, quoted as SubObjectsDeleteFailed quotes it (with
// the same marker, so a parent passes it up the tree), and how to go on.
// The cause comes from the object the job read already: no request. An
// object without a lastError (written by something else than Terrace's
// controllers) is only named. An orphan (see takeOverHandDeletion) is said
// to be one: usually the job deleted it, not a user.
func handDeletionFailedMessage(what string, orphan bool, f subObjectFailure) string {
	how := " was deleted by hand"
	if orphan {
		how = ", no longer rendered by the blueprint, was deleted"
	}
	if f.lastError == nil || f.lastError.Reason == "" {
		return what + how + " and its deletion failed (see its status); the next job retries it"
	}
	return what + how + " and its deletion failed" + causeMarker + f.cause() + deleteRetryAdvice
}

// handOverDeletion hands this job to obj, a deleted execution or
// sub-installation, which then runs its deletion flow, and returns it as a
// failure when it finished this job DeleteFailed (nil otherwise).
func (r *Reconciler) handOverDeletion(ctx context.Context, s *scope, obj client.Object) (*subObjectFailure, error) {
	job := s.inst.Status.JobID
	var f subObjectFailure
	var finished string
	var err error
	switch o := obj.(type) {
	case *lsv1alpha1.Execution:
		err = r.handOverExecution(ctx, s, o, job)
		f = subObjectFailure{kind: "execution", name: o.Name, phase: o.Status.Phase, lastError: o.Status.LastError}
		finished = o.Status.JobIDFinished
	case *lsv1alpha1.Installation:
		err = r.handOverInstallation(ctx, s, o, job)
		f = subObjectFailure{kind: "sub-installation", name: o.Name, phase: o.Status.Phase, lastError: o.Status.LastError}
		finished = o.Status.JobIDFinished
	}
	if err != nil {
		return nil, err
	}
	if finishedWith(finished, job) && f.phase == lsv1alpha1.PhaseDeleteFailed {
		return &f, nil
	}
	return nil, nil
}

// subObjectWriteError classifies the error of a create or update of a
// sub-object (what: "creating execution", ...). Two never go away by
// retrying, so they fail the job (TemplateFailed), which also keeps the
// installation deletable: the API server refuses what the blueprint rendered
// (Invalid), or the name is taken by an object this installation does not
// own (AlreadyExists; the cache did not show it as ours). Everything else,
// including AlreadyExists for our own object the cache has not caught up
// with, is retried.
func subObjectWriteError(ctx context.Context, c client.Reader, inst *lsv1alpha1.Installation, obj client.Object, what string, err error) error {
	switch {
	case apierrors.IsInvalid(err):
		return flow.StalledError(ReasonTemplateFailed, fmt.Errorf("%s: the API server refuses what the blueprint rendered: %w", what, err))
	case apierrors.IsAlreadyExists(err):
		existing := obj.DeepCopyObject().(client.Object)
		if gerr := c.Get(ctx, client.ObjectKeyFromObject(obj), existing); gerr == nil && !isOwnedBy(existing, inst) {
			return flow.Stalledf(ReasonTemplateFailed, "%s: %s %s exists but does not belong to this installation", what, kindOf(obj), obj.GetName())
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// kindOf names the kind of a sub-object in messages.
func kindOf(obj client.Object) string {
	if _, ok := obj.(*lsv1alpha1.Execution); ok {
		return "execution"
	}
	return "installation"
}

// syncSubInstallations creates or updates one sub-installation per template
// and deletes the orphans (owned sub-installations without a template),
// marking them delete-ignore-successors first: their siblings are going too.
func (r *Reconciler) syncSubInstallations(ctx context.Context, s *scope, bp *blueprint.Blueprint, templates []blueprint.InstallationTemplate) error {
	inst := s.inst
	existing, _, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return err
	}
	byName := map[string]*lsv1alpha1.Installation{}
	for _, e := range existing {
		byName[e.Name] = e
	}
	refs := make([]lsv1alpha1.NamedObjectReference, 0, len(templates))
	for i := range templates {
		t := &templates[i]
		spec, err := subSpec(inst, bp, t)
		if err != nil {
			return flow.StalledError(ReasonTemplateFailed, err)
		}
		name := SubInstallationName(inst.Name, t.Name)
		refs = append(refs, lsv1alpha1.NamedObjectReference{Name: t.Name, Reference: lsv1alpha1.ObjectReference{Name: name, Namespace: inst.Namespace}})
		cur, ok := byName[name]
		delete(byName, name)
		if !ok {
			sub := &lsv1alpha1.Installation{}
			sub.Name, sub.Namespace = name, inst.Namespace
			sub.Labels = map[string]string{lsv1alpha1.EncompassedByLabel: labelValue(inst.Name), lsv1alpha1.SubInstallationNameLabel: labelValue(t.Name)}
			sub.Annotations = tracing.Inject(ctx, nil)
			// Created with the finalizer its own reconcile would add.
			sub.Finalizers = []string{lsv1alpha1.Finalizer}
			sub.Spec = *spec
			if err := controllerutil.SetControllerReference(inst, sub, r.Client.Scheme()); err != nil {
				return err
			}
			if err := r.Client.Create(ctx, sub, client.FieldOwner(FieldManager)); err != nil {
				return subObjectWriteError(ctx, r.Client, inst, sub, fmt.Sprintf("creating subinstallation %q", t.Name), err)
			}
			s.remember(sub)
			continue
		}
		if cur.DeletionTimestamp != nil {
			if err := r.takeOverHandDeletion(ctx, s, cur, false); err != nil {
				return err
			}
			continue
		}
		if !equality.Semantic.DeepEqual(cur.Spec, *spec) {
			before := cur.DeepCopy()
			cur.Spec = *spec
			if err := r.Client.Patch(ctx, cur, client.MergeFrom(before), client.FieldOwner(FieldManager)); err != nil {
				return subObjectWriteError(ctx, r.Client, inst, cur, fmt.Sprintf("updating subinstallation %q", t.Name), err)
			}
			s.remember(cur)
		}
	}
	for _, orphan := range byName {
		if orphan.DeletionTimestamp != nil {
			continue
		}
		s.deleted = true
		// The mark and this job's trace context (only while tracing is on)
		// in one write, so the orphan's deletion joins this job's trace.
		yes := "true"
		gone, err := prepareDeletion(ctx, r.Client, orphan, map[string]*string{lsv1alpha1.DeleteIgnoreSuccessorsAnnotation: &yes})
		if err != nil {
			return err
		}
		if gone {
			continue
		}
		if err := r.Client.Delete(ctx, orphan); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting orphaned sub-installation %s: %w", orphan.Name, err)
		}
	}
	inst.Status.InstallationReferences = refs
	return nil
}

func subSpec(parent *lsv1alpha1.Installation, bp *blueprint.Blueprint, t *blueprint.InstallationTemplate) (*lsv1alpha1.InstallationSpec, error) {
	fs, err := t.Filesystem(bp.Files)
	if err != nil {
		return nil, err
	}
	spec := &lsv1alpha1.InstallationSpec{
		Context:   parent.Spec.Context,
		Blueprint: lsv1alpha1.BlueprintDefinition{Inline: &lsv1alpha1.InlineBlueprint{Filesystem: fs}},
		Imports:   t.Imports,
		Exports:   t.Exports,
	}
	if spec.ImportDataMappings, err = toAnyJSON(t.ImportDataMappings); err != nil {
		return nil, err
	}
	if spec.ExportDataMappings, err = toAnyJSON(t.ExportDataMappings); err != nil {
		return nil, err
	}
	return spec, nil
}

func toAnyJSON(m map[string]any) (map[string]lsv1alpha1.AnyJSON, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]lsv1alpha1.AnyJSON, len(m))
	for k, v := range m {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out[k] = lsv1alpha1.NewAnyJSON(raw)
	}
	return out, nil
}

// phaseCleanupOrphaned hands the job to the orphaned (deleted)
// sub-installations and execution, which runs their deletion flow, and
// waits until they are gone.
func (r *Reconciler) phaseCleanupOrphaned(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	subs, exec, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return "", err
	}
	var working []string
	var failed []subObjectFailure
	handOver := func(o client.Object, what string) error {
		deleteFailed, err := r.handOverDeletion(ctx, s, o)
		switch {
		case err != nil:
			return err
		case deleteFailed != nil:
			failed = append(failed, *deleteFailed)
		default:
			working = append(working, what)
		}
		return nil
	}
	if exec != nil && exec.DeletionTimestamp != nil {
		if err := handOver(exec, "execution "+exec.Name); err != nil {
			return "", err
		}
	}
	for _, sub := range subs {
		if sub.DeletionTimestamp == nil {
			continue
		}
		if err := handOver(sub, "sub-installation "+sub.Name); err != nil {
			return "", err
		}
	}
	switch {
	case len(working) > 0:
		return "", waitf("orphans %s to be deleted", strings.Join(working, ", "))
	case len(failed) > 0:
		// The cause is quoted from the orphans as the job read them: no
		// request.
		return "", jobEndsf(ReasonOrphansDeleteFailed, lsv1alpha1.ErrorInternalProblem, "%s", orphansDeleteFailedMessage(failed))
	}
	return lsv1alpha1.PhaseObjectsCreated, nil
}

// phaseObjectsCreated hands the job to every sub-installation and the execution.
func (r *Reconciler) phaseObjectsCreated(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	subs, exec, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return "", err
	}
	for _, sub := range subs {
		if sub.DeletionTimestamp == nil {
			if err := r.handOverInstallation(ctx, s, sub, s.inst.Status.JobID); err != nil {
				return "", err
			}
		}
	}
	if exec != nil && exec.DeletionTimestamp == nil {
		if err := r.handOverExecution(ctx, s, exec, s.inst.Status.JobID); err != nil {
			return "", err
		}
	}
	return lsv1alpha1.PhaseProgressing, nil
}

// phaseProgressing waits until every sub-object finished the job.
func (r *Reconciler) phaseProgressing(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	subs, exec, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return "", err
	}
	job := s.inst.Status.JobID
	// What this job created is in the status; the caches (other informers)
	// may not show it yet. A sub-object missing from them is waited for, not
	// taken for absent: else the job would finish before it.
	have := map[string]bool{}
	for _, sub := range subs {
		have[sub.Name] = true
	}
	var missing []string
	for _, ref := range s.inst.Status.InstallationReferences {
		if !have[ref.Reference.Name] {
			missing = append(missing, "sub-installation "+ref.Reference.Name)
		}
	}
	if ref := s.inst.Status.ExecutionReference; ref != nil && exec == nil {
		missing = append(missing, "execution "+ref.Name)
	}
	if len(missing) > 0 {
		lagging, err := r.confirmMissing(ctx, s, exec == nil)
		if err != nil {
			return "", err
		}
		if len(lagging) > 0 {
			return "", waitf("%s to appear in the cache", strings.Join(lagging, ", "))
		}
	}
	var working []string
	var failed []subObjectFailure
	// The failed sub-objects' lastErrors come from the same (cached)
	// objects: naming the cause costs no request.
	check := func(kind, name, finished string, phase lsv1alpha1.Phase, lastError *lsv1alpha1.Error) {
		switch {
		case !finishedWith(finished, job):
			working = append(working, kind+" "+name)
		case phase != lsv1alpha1.PhaseSucceeded:
			failed = append(failed, subObjectFailure{kind: kind, name: name, phase: phase, lastError: lastError})
		}
	}
	for _, sub := range subs {
		st := sub.Status
		switch {
		case sub.DeletionTimestamp == nil:
			check("sub-installation", sub.Name, st.JobIDFinished, st.Phase, st.LastError)
		case st.JobID == job || st.JobID != st.JobIDFinished:
			// Deleted by hand during this job: it runs the job it holds to
			// its end (an install job ends DeletedDuringJob, a job it had
			// not started yet runs as its deletion), and the job does not
			// finish before it, as for any sub-object: else the next job
			// would find it mid-flow. Its outcome in this job counts.
			if !finishedWith(st.JobIDFinished, job) {
				working = append(working, "sub-installation "+sub.Name+" (deleted by hand)")
				continue
			}
			check("sub-installation", sub.Name, st.JobIDFinished, st.Phase, st.LastError)
		}
		// Else it is idle, deleted by hand without this job: left out;
		// the next job's Init hands it its deletion and creates it again.
	}
	if exec != nil {
		check("execution", exec.Name, exec.Status.JobIDFinished, exec.Status.Phase, exec.Status.LastError)
		if st := exec.Status; finishedWith(st.JobIDFinished, job) && st.ObservedGeneration > 0 && st.ObservedGeneration < exec.Generation {
			// The execution ran the job with a spec older than the one this
			// job wrote (it had started the job before Init re-templated
			// it: a job start repeated after a conflict): its items are not
			// this job's, so the job must not count as done.
			return "", flow.Stalledf(ReasonSpecChanged,
				"execution %s ran the job with its spec of generation %d, not the current %d this job wrote (the spec changed while the job started): add the reconcile annotation to the root installation to start a job with the new spec",
				exec.Name, st.ObservedGeneration, exec.Generation)
		}
	}
	switch {
	case len(working) > 0:
		return "", waitf("%s to finish", strings.Join(working, ", "))
	case len(failed) > 0:
		return "", jobEndsf(ReasonSubObjectsFailed, lsv1alpha1.ErrorForInfoOnly, "%s", subObjectsFailedMessage(failed))
	}
	return lsv1alpha1.PhaseCompleting, nil
}

// ReasonSubObjectGone: a Warning event when a sub-installation this job
// created or handed the job to is gone before it finished (deleted by hand:
// its finalizer removed, or its deletion ran with this job, which it had
// not started when it was deleted).
const ReasonSubObjectGone = "SubObjectGone"

// confirmMissing asks the API server about the sub-objects of the status
// that the cache does not show (a rare path: normally the cache has caught
// up), and returns those that exist: the cache lags, the job waits for them.
// A sub-installation that is gone (deleted by hand: its finalizer removed,
// or it ran this job, handed over before it started it, as its deletion)
// is left out: the job goes on without it (Warning event SubObjectGone) and
// the next job's Init creates it again. A gone execution fails the job: its exports
// are the job's result, and waiting would never end.
func (r *Reconciler) confirmMissing(ctx context.Context, s *scope, execMissing bool) ([]string, error) {
	inst := s.inst
	subs, _, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, sub := range subs {
		have[sub.Name] = true
	}
	key, job := client.ObjectKeyFromObject(inst), inst.Status.JobID
	var lagging, gone []string
	for _, ref := range inst.Status.InstallationReferences {
		name := ref.Reference.Name
		if have[name] || r.gone.known(key, inst.UID, job, name) {
			// Confirmed gone earlier in this job: no second read, no
			// second event.
			continue
		}
		sub := &lsv1alpha1.Installation{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: name}, sub)
		switch {
		case apierrors.IsNotFound(err), err == nil && !isOwnedBy(sub, inst):
			gone = append(gone, name)
		case err != nil:
			return nil, fmt.Errorf("reading sub-installation %s: %w", name, err)
		default:
			lagging = append(lagging, "sub-installation "+name)
		}
	}
	if ref := inst.Status.ExecutionReference; ref != nil && execMissing {
		exec := &lsv1alpha1.Execution{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: ref.Name}, exec)
		switch {
		case apierrors.IsNotFound(err), err == nil && !isOwnedBy(exec, inst):
			return nil, jobEndsf(ReasonSubObjectsFailed, lsv1alpha1.ErrorInternalProblem,
				"execution %s is gone before it finished the job (deleted by hand, its finalizer removed): the next job creates it again", ref.Name)
		case err != nil:
			return nil, fmt.Errorf("reading execution %s: %w", ref.Name, err)
		default:
			lagging = append(lagging, "execution "+ref.Name)
		}
	}
	if len(gone) > 0 {
		r.gone.add(key, inst.UID, job, gone...)
		logf.FromContext(ctx).Info("sub-installations of the job are gone; going on without them", "subInstallations", gone)
		r.Recorder.Eventf(inst, nil, "Warning", ReasonSubObjectGone, "Progressing",
			"sub-installations %s are gone before they finished the job (deleted by hand): the job goes on without them, the next job creates them again", strings.Join(gone, ", "))
	}
	return lagging, nil
}

// phaseCompleting fails the job if the spec or the imports changed during
// it, else computes and writes the exports and triggers the successors.
func (r *Reconciler) phaseCompleting(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	inst := s.inst
	if inst.DeletionTimestamp != nil {
		// Before the generation: setting the deletion timestamp moves it
		// (the API server does so for an object with finalizers), and
		// SpecChanged would advise the reconcile annotation, which does
		// nothing for an installation being deleted.
		return "", completingWhileDeleting(inst, r.deletionFollows(ctx, inst))
	}
	if inst.Generation != inst.Status.ObservedGeneration {
		return "", flow.Stalledf(ReasonSpecChanged,
			"the spec changed during the job (generation %d, job started with %d): add the reconcile annotation to the root installation to start a job with the new spec", inst.Generation, inst.Status.ObservedGeneration)
	}
	bp, err := parseBlueprint(inst)
	if err != nil {
		return "", err
	}
	im, err := r.currentImports(ctx, inst, bp)
	if err != nil {
		if isStalled(err) {
			return "", flow.Stalledf(ReasonImportsChanged, "the imports changed during the job: %v", err)
		}
		return "", err
	}
	if im.hash != inst.Status.ImportsHash {
		return "", flow.Stalledf(ReasonImportsChanged,
			"the imports changed during the job: add the reconcile annotation to the root installation to start a job with the new imports")
	}
	values, err := r.exportValues(ctx, inst, im)
	if err != nil {
		if apierrors.IsNotFound(err) {
			// Completing may run right after the execution was seen finished:
			// its exports DataObject (another informer) may not be cached yet.
			return "", waitf("the execution's exports to appear: %v", err)
		}
		return "", err
	}
	exports, err := bp.RenderExports(values)
	if err != nil {
		return "", templateFailure(err)
	}
	if len(inst.Spec.ExportDataMappings) > 0 {
		exprs, err := expressions(inst.Spec.ExportDataMappings)
		if err != nil {
			return "", flow.StalledError(ReasonDataMappingFailed, err)
		}
		mapped, err := mapping.Evaluate(exprs, mapping.ExportsVar, exports)
		if err != nil {
			return "", flow.StalledError(ReasonDataMappingFailed, fmt.Errorf("exportDataMappings: %w", err))
		}
		for k, v := range mapped {
			exports[k] = v
		}
	}
	if err := bp.ValidateExports(exports); err != nil {
		return "", flow.StalledError(ReasonExportInvalid, err)
	}
	if err := r.writeExports(ctx, inst, exports); err != nil {
		return "", err
	}
	if err := r.deleteStale(ctx, inst, writtenExports, sets.New(exportKeys(inst)...)); err != nil {
		return "", err
	}
	// Target copies of imports this installation no longer has, which Init
	// kept: every sub-installation has finished the job now, so the deploy
	// items of the last job that named them are uninstalled. The same rule
	// as in Init: with no sub-installation, no copies.
	contextKeep := sets.New[string]()
	if len(inst.Status.InstallationReferences) > 0 {
		contextKeep = contextCopyKeys(inst, im)
	}
	if err := r.deleteStale(ctx, inst, writtenContextCopies, contextKeep); err != nil {
		return "", err
	}
	if err := r.triggerSuccessors(ctx, inst); err != nil {
		return "", err
	}
	return lsv1alpha1.PhaseSucceeded, nil
}

// currentImports resolves the imports for Completing from the cache; when
// they differ from those the job started with (read from the API server in
// Init), it reads them from the API server before it calls them changed: the
// cache may still show a value older than Init's.
func (r *Reconciler) currentImports(ctx context.Context, inst *lsv1alpha1.Installation, bp *blueprint.Blueprint) (*imports, error) {
	im, err := r.resolveImports(ctx, inst, bp, fromCache)
	if err == nil && im.hash == inst.Status.ImportsHash {
		return im, nil
	}
	return r.resolveImports(ctx, inst, bp, fromAPIServer)
}

// isStalled reports whether err itself, not wrapped, is a stalled error of
// this package (the only kind resolveImports returns unwrapped).
func isStalled(err error) bool {
	fe, ok := err.(*flow.Error) //nolint:errorlint // created unwrapped in this package
	return ok && fe.Kind == flow.Stalled
}

// exportValues builds what export executions see: .imports and .values
// (.values.deployitems from the execution's export DataObject,
// .values.dataobjects and .values.targets from the installation's context,
// where its sub-installations wrote their exports).
func (r *Reconciler) exportValues(ctx context.Context, inst *lsv1alpha1.Installation, im *imports) (map[string]any, error) {
	items := map[string]any{}
	if ref := inst.Status.ExecutionReference; ref != nil {
		exec := &lsv1alpha1.Execution{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: ref.Name}, exec); err != nil {
			if apierrors.IsNotFound(err) {
				// Gone in Completing: an error to retry, not the wait for
				// exports not cached yet that NotFound means to the caller.
				return nil, fmt.Errorf("execution %s not found", ref.Name)
			}
			return nil, fmt.Errorf("reading execution %s: %w", ref.Name, err)
		}
		if er := exec.Status.ExportReference; er != nil {
			ns := er.Namespace
			if ns == "" {
				ns = inst.Namespace
			}
			do := &lsv1alpha1.DataObject{}
			// Written right before the execution's status that woke this
			// reconcile, on another watch: read live when the cache does not
			// show it yet (no event of it would wake this installation).
			if err := r.getImport(ctx, fromCache, client.ObjectKey{Namespace: ns, Name: er.Name}, do); err != nil {
				return nil, fmt.Errorf("reading the execution's exports %s: %w", er.Name, err)
			}
			v, err := decodeJSON(do.Data.RawMessage)
			if err != nil {
				return nil, err
			}
			if m, ok := v.(map[string]any); ok {
				items = m
			}
		}
	}
	// The sub-installations write their exports into this installation's
	// context right before the status writes that wake it, on other
	// watches: with sub-installations the context is listed from the API
	// server, or a lagging cache would export a missing or old value.
	contextReader := client.Reader(r.Client)
	if len(inst.Status.InstallationReferences) > 0 {
		contextReader = r.APIReader
	}
	dataobjects := map[string]any{}
	dos := &lsv1alpha1.DataObjectList{}
	if err := contextReader.List(ctx, dos, client.InNamespace(inst.Namespace), client.MatchingLabels{ContextLabel: labelValue(inst.Name)}); err != nil {
		return nil, fmt.Errorf("listing context data objects: %w", err)
	}
	for i := range dos.Items {
		v, err := decodeJSON(dos.Items[i].Data.RawMessage)
		if err != nil {
			return nil, err
		}
		dataobjects[dos.Items[i].Annotations[KeyAnnotation]] = v
	}
	targets := map[string]any{}
	ts := &lsv1alpha1.TargetList{}
	if err := contextReader.List(ctx, ts, client.InNamespace(inst.Namespace), client.MatchingLabels{ContextLabel: labelValue(inst.Name)}); err != nil {
		return nil, fmt.Errorf("listing context targets: %w", err)
	}
	for i := range ts.Items {
		targets[ts.Items[i].Annotations[KeyAnnotation]] = targetValue(&ts.Items[i])
	}
	return map[string]any{
		"imports":      im.values,
		"context":      im.configurations,
		"installation": map[string]any{"name": inst.Name, "namespace": inst.Namespace},
		"values":       map[string]any{"deployitems": items, "dataobjects": dataobjects, "targets": targets},
	}, nil
}

// writeExports writes spec.exports: data as DataObjects, targets as Targets,
// in the parent's context (verbatim names for root installations).
func (r *Reconciler) writeExports(ctx context.Context, inst *lsv1alpha1.Installation, exports map[string]any) error {
	scope := parentName(inst)
	for _, d := range inst.Spec.Exports.Data {
		v, ok := exports[d.Name]
		if !ok {
			return flow.Stalledf(ReasonExportInvalid, "export %q: the blueprint's export executions and the exportDataMappings produce no such value (they produce: %s)", d.Name, strings.Join(sortedKeys(exports), ", "))
		}
		w := contextWrite{scope: scope, ref: d.DataRef, what: dataExportWhat(d), invalid: ReasonExportInvalid}
		if err := r.writeDataObject(ctx, inst, w, v); err != nil {
			return err
		}
	}
	for _, t := range inst.Spec.Exports.Targets {
		v, ok := exports[t.Name]
		if !ok {
			return flow.Stalledf(ReasonExportInvalid, "target export %q: no such export value", t.Name)
		}
		spec, err := targetSpecOf(v)
		if err != nil {
			return flow.StalledError(ReasonExportInvalid, fmt.Errorf("target export %q: %w", t.Name, err))
		}
		w := contextWrite{scope: scope, ref: t.Target, what: targetExportWhat(t), invalid: ReasonExportInvalid}
		if err := r.writeTarget(ctx, inst, w, spec); err != nil {
			return err
		}
	}
	return nil
}

// dataExportWhat and targetExportWhat name an export in messages.
func dataExportWhat(d lsv1alpha1.DataExport) string {
	return fmt.Sprintf("export %q (dataRef %q)", d.Name, d.DataRef)
}

func targetExportWhat(t lsv1alpha1.TargetExport) string {
	return fmt.Sprintf("target export %q (target %q)", t.Name, t.Target)
}

// targetSpecOf accepts a Target ({spec: {...}}) or a bare spec ({type, config}).
func targetSpecOf(v any) (lsv1alpha1.TargetSpec, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return lsv1alpha1.TargetSpec{}, fmt.Errorf("must be a mapping with type and config, got %T", v)
	}
	if spec, ok := m["spec"].(map[string]any); ok {
		m = spec
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return lsv1alpha1.TargetSpec{}, err
	}
	var spec lsv1alpha1.TargetSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return lsv1alpha1.TargetSpec{}, err
	}
	if spec.Type == "" {
		return lsv1alpha1.TargetSpec{}, fmt.Errorf("has no type")
	}
	return spec, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// triggerSuccessors starts the successors: root successors get the reconcile
// annotation; sub-installations are woken by the watch that maps this
// installation's status change to the installations importing its exports.
func (r *Reconciler) triggerSuccessors(ctx context.Context, inst *lsv1alpha1.Installation) error {
	if !isRoot(inst) {
		return nil
	}
	succs, err := r.listByIndex(ctx, inst.Namespace, ImportsIndex, exportKeys(inst), inst.Name)
	if err != nil {
		return err
	}
	op := string(lsv1alpha1.OperationReconcile)
	for _, s := range succs {
		if !isRoot(s) || s.DeletionTimestamp != nil {
			continue
		}
		if err := patchAnnotations(ctx, r.Client, s, map[string]*string{lsv1alpha1.OperationAnnotation: &op}); err != nil {
			return err
		}
		r.Recorder.Eventf(s, inst, "Normal", ReasonSuccessorTriggered, "Reconcile", "triggered by predecessor %s", inst.Name)
	}
	return nil
}

// phaseInitDelete waits for the successors to be gone (unless
// delete-ignore-successors), passes delete-without-uninstall down, and
// deletes the sub-objects.
func (r *Reconciler) phaseInitDelete(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	inst := s.inst
	if inst.Annotations[lsv1alpha1.DeleteIgnoreSuccessorsAnnotation] != "true" {
		succs, err := r.listByIndex(ctx, inst.Namespace, ImportsIndex, exportKeys(inst), inst.Name)
		if err != nil {
			return "", err
		}
		var names []string
		for _, sc := range succs {
			if parentName(sc) == parentName(inst) {
				names = append(names, sc.Name)
			}
		}
		if len(names) > 0 {
			return "", waitf("successors %s to be deleted first", strings.Join(names, ", "))
		}
	}
	subs, exec, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return "", err
	}
	objs := make([]client.Object, 0, len(subs)+1)
	for _, sub := range subs {
		objs = append(objs, sub)
	}
	if exec != nil {
		objs = append(objs, exec)
	}
	for _, o := range objs {
		s.deleted = true
		set := map[string]*string{}
		if inst.Annotations[lsv1alpha1.DeleteWithoutUninstallAnnotation] == "true" {
			yes := "true"
			set[lsv1alpha1.DeleteWithoutUninstallAnnotation] = &yes
		}
		if o.GetDeletionTimestamp() != nil {
			// Being deleted already: the job's trace context goes with the
			// job (TriggerDelete).
			if err := patchAnnotations(ctx, r.Client, o, set); err != nil {
				return "", err
			}
			continue
		}
		// An object this job deletes continues the deletion job's trace
		// from the moment it is deleted, not the trace of the job that
		// created it: the span context goes into the same write as
		// delete-without-uninstall (only while tracing is on).
		gone, err := prepareDeletion(ctx, r.Client, o, set)
		if err != nil {
			return "", err
		}
		if gone {
			continue
		}
		if err := r.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("deleting %s: %w", o.GetName(), err)
		}
	}
	return lsv1alpha1.PhaseTriggerDelete, nil
}

// phaseTriggerDelete hands the job to every remaining sub-object.
func (r *Reconciler) phaseTriggerDelete(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	subs, exec, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return "", err
	}
	for _, sub := range subs {
		if err := r.handOverInstallation(ctx, s, sub, s.inst.Status.JobID); err != nil {
			return "", err
		}
	}
	if exec != nil {
		if err := r.handOverExecution(ctx, s, exec, s.inst.Status.JobID); err != nil {
			return "", err
		}
	}
	return lsv1alpha1.PhaseDeleting, nil
}

// phaseDeleting waits for the sub-objects. All gone: the context objects go
// and the finalizer is removed. All finished but some left: DeleteFailed. An
// object never finishes before its sub-objects, so one failure among
// unfinished sub-objects still waits.
func (r *Reconciler) phaseDeleting(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	inst := s.inst
	subs, exec, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return "", err
	}
	job := inst.Status.JobID
	var working []string
	var failed []subObjectFailure
	// As in Progressing, the failed sub-objects' lastErrors come from the
	// same (cached) objects: quoting the cause costs no request.
	check := func(kind, name, finished string, phase lsv1alpha1.Phase, lastError *lsv1alpha1.Error) {
		if finishedWith(finished, job) {
			failed = append(failed, subObjectFailure{kind: kind, name: name, phase: phase, lastError: lastError})
		} else {
			working = append(working, kind+" "+name)
		}
	}
	for _, sub := range subs {
		check("sub-installation", sub.Name, sub.Status.JobIDFinished, sub.Status.Phase, sub.Status.LastError)
	}
	if exec != nil {
		check("execution", exec.Name, exec.Status.JobIDFinished, exec.Status.Phase, exec.Status.LastError)
	}
	switch {
	case len(working) > 0:
		return "", waitf("%s to be deleted", strings.Join(working, ", "))
	case len(failed) > 0:
		return "", jobEndsf(ReasonDeleteFailed, lsv1alpha1.ErrorForInfoOnly, "%s", subObjectsDeleteFailedMessage(failed))
	}
	if err := r.deleteContext(ctx, inst); err != nil {
		return "", err
	}
	if err := patchMeta(ctx, r.Client, inst, []string{lsv1alpha1.Finalizer}, nil); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	s.gone = true
	return "", nil
}

// deleteContext deletes the DataObjects and Targets of the installation's
// context (its imports copied for its sub-installations, their exports).
func (r *Reconciler) deleteContext(ctx context.Context, inst *lsv1alpha1.Installation) error {
	sel := client.MatchingLabels{ContextLabel: labelValue(inst.Name)}
	if err := r.Client.DeleteAllOf(ctx, &lsv1alpha1.DataObject{}, client.InNamespace(inst.Namespace), sel); err != nil {
		return fmt.Errorf("deleting context data objects: %w", err)
	}
	if err := r.Client.DeleteAllOf(ctx, &lsv1alpha1.Target{}, client.InNamespace(inst.Namespace), sel); err != nil {
		return fmt.Errorf("deleting context targets: %w", err)
	}
	return nil
}
