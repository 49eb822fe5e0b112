package installation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/kit/flow"
)

// ReasonExportConflict fails a job whose export or context copy names a
// DataObject or Target that exists but belongs to someone else.
const ReasonExportConflict = "ExportConflict"

// writeContextImports writes the installation's imports into its own context
// (DataObjects and Targets named "<installation>.<import>") for its
// sub-installations.
func (r *Reconciler) writeContextImports(ctx context.Context, s *scope, im *imports) error {
	inst := s.inst
	for name, v := range im.values {
		if im.isTarget(name) {
			continue
		}
		w := contextWrite{scope: inst.Name, ref: name, what: fmt.Sprintf("context copy of import %q", name), invalid: ReasonImportInvalid, fresh: s.fresh,
			fromSecret: im.fromSecret[name]}
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
	// fromSecret marks a context copy of an import read from a Secret
	// (FromSecretAnnotation).
	fromSecret bool
	// labels and annotations are those a target export value carries:
	// added to the Target (the context label and key annotation win).
	labels, annotations map[string]string
}

// FromSecretAnnotation marks a context copy of an import read from a Secret
// (or from such a copy): the messages of the sub-installations importing it
// never quote its value, as the parent's never quote the Secret's.
const FromSecretAnnotation = "installation.terrace.dev/from-secret"

// checkName refuses, before any request, a name the API server would
// refuse (Invalid): retrying would never help.
func (w contextWrite) checkName(kind, name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return jobEndsf(w.invalid, lsv1alpha1.ErrorConfigurationProblem, "%s: %q is not a valid %s name: %s", w.what, name, kind, strings.Join(errs, "; "))
	}
	return nil
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
	if group, ok := blueprint.GroupOf(key); ok {
		// A copy of one Target of a targetList or targetMap import.
		key = group
	}
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
		markFromSecret(do, w.fromSecret)
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
	markFromSecret(do, w.fromSecret)
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
		w.setMeta(t)
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
	w.setMeta(t)
	if equality.Semantic.DeepEqual(before, t) {
		return nil
	}
	if err := r.Client.Patch(ctx, t, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager)); err != nil {
		return w.writeError("updating", "Target", t.Name, err)
	}
	return nil
}

// setMeta adds the write's labels and annotations to o, then its context
// label and key annotation.
func (w contextWrite) setMeta(o client.Object) {
	if len(w.labels) > 0 {
		o.SetLabels(merged(o.GetLabels(), w.labels))
	}
	if len(w.annotations) > 0 {
		o.SetAnnotations(merged(o.GetAnnotations(), w.annotations))
	}
	setContextMeta(o, w.scope, w.ref)
}

func merged(into, from map[string]string) map[string]string {
	if into == nil {
		into = make(map[string]string, len(from))
	}
	for k, v := range from {
		into[k] = v
	}
	return into
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

// markFromSecret sets or removes FromSecretAnnotation.
func markFromSecret(o client.Object, fromSecret bool) {
	a := o.GetAnnotations()
	switch {
	case fromSecret:
		if a == nil {
			a = map[string]string{}
		}
		a[FromSecretAnnotation] = "true"
	case a != nil:
		delete(a, FromSecretAnnotation)
	}
	o.SetAnnotations(a)
}

func jsonEqual(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return equality.Semantic.DeepEqual(va, vb)
}

// syncContextCopies writes the imports into the installation's context for
// its sub-installations (withSubs) and deletes the copies no longer needed.
func (r *Reconciler) syncContextCopies(ctx context.Context, s *scope, im *imports, withSubs bool) error {
	// The context copies come after the sub-installations are re-templated:
	// a value a sub-installation exported in the last job and this
	// installation now imports is then no longer that sub-installation's
	// export, and its object moves to this installation (claim) instead of
	// conflicting in every job.
	keep := sets.New[string]()
	if withSubs {
		// Sub-installations read the parent's imports from its context.
		if err := r.writeContextImports(ctx, s, im); err != nil {
			return err
		}
		keep = contextCopyKeys(s.inst, im)
	}
	// Copies of data imports this installation no longer has (or all of
	// them, with no sub-installations left) go now, before any
	// sub-installation gets the job: a value that moved from this
	// installation's imports to a sub-installation's exports is then free for
	// that sub-installation to write, and no sub-installation reads a copy
	// nobody maintains. The sub-installations are idle (the last job
	// finished) and re-templated. Stale Target copies wait for Completing
	// (see writtenDataCopies).
	return r.deleteStale(ctx, s.inst, writtenDataCopies, keep)
}
