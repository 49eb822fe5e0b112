package installation

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// syncExecution creates or updates the installation's execution (without a
// job: that is handed over in ObjectsCreated).
func (r *Reconciler) syncExecution(ctx context.Context, s *scope, items []lsv1alpha1.DeployItemTemplate) error {
	inst := s.inst
	exec := &lsv1alpha1.Execution{}
	exec.Name, exec.Namespace = executionName(inst), inst.Namespace
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(exec), exec)
	switch {
	case apierrors.IsNotFound(err) && len(items) == 0:
		inst.Status.ExecutionReference = nil
		return nil
	case apierrors.IsNotFound(err):
		if err := r.createExecution(ctx, s, exec, items); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("reading execution: %w", err)
	case !isOwnedBy(exec, inst):
		return flow.Stalledf(ReasonTemplateFailed, "execution %s exists but does not belong to this installation", exec.Name)
	case exec.DeletionTimestamp != nil:
		// With no deploy items, it is the orphan this job's Init
		// deleted before it waited (or one deleted by hand meanwhile):
		// it goes, and is not created again.
		return r.takeOverHandDeletion(ctx, s, exec, len(items) == 0)
	case len(items) == 0:
		return r.deleteOrphanedExecution(ctx, s, exec)
	default:
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

// createExecution creates the execution exec of the installation with items.
func (r *Reconciler) createExecution(ctx context.Context, s *scope, exec *lsv1alpha1.Execution, items []lsv1alpha1.DeployItemTemplate) error {
	inst := s.inst
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
	return nil
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
	adding := 0
	for i := range templates {
		if byName[SubInstallationName(inst.Name, templates[i].Name)] == nil {
			adding++
		}
	}
	if err := r.checkTreeSize(ctx, inst, adding); err != nil {
		return err
	}
	refs := make([]lsv1alpha1.NamedObjectReference, 0, len(templates))
	for i := range templates {
		t := &templates[i]
		name := SubInstallationName(inst.Name, t.Name)
		refs = append(refs, lsv1alpha1.NamedObjectReference{Name: t.Name, Reference: lsv1alpha1.ObjectReference{Name: name, Namespace: inst.Namespace}})
		if err := r.syncSubInstallation(ctx, s, bp, t, name, byName[name]); err != nil {
			return err
		}
		delete(byName, name)
	}
	if err := r.deleteOrphanedSubs(ctx, s, byName); err != nil {
		return err
	}
	inst.Status.InstallationReferences = refs
	return nil
}

// syncSubInstallation creates the sub-installation name of template t, or
// updates cur, its current version (nil: none).
func (r *Reconciler) syncSubInstallation(ctx context.Context, s *scope, bp *blueprint.Blueprint, t *blueprint.InstallationTemplate, name string, cur *lsv1alpha1.Installation) error {
	inst := s.inst
	spec, err := subSpec(inst, s.component, bp, t)
	if err != nil {
		return flow.StalledError(ReasonTemplateFailed, err)
	}
	switch {
	case cur == nil:
		sub := &lsv1alpha1.Installation{}
		sub.Name, sub.Namespace = name, inst.Namespace
		sub.Labels = map[string]string{lsv1alpha1.EncompassedByLabel: labelValue(inst.Name), lsv1alpha1.SubInstallationNameLabel: labelValue(t.Name)}
		if root := rootUID(inst); root != "" {
			sub.Labels[RootLabel] = root
		}
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
	case cur.DeletionTimestamp != nil:
		return r.takeOverHandDeletion(ctx, s, cur, false)
	case !equality.Semantic.DeepEqual(cur.Spec, *spec):
		before := cur.DeepCopy()
		cur.Spec = *spec
		if err := r.Client.Patch(ctx, cur, client.MergeFrom(before), client.FieldOwner(FieldManager)); err != nil {
			return subObjectWriteError(ctx, r.Client, inst, cur, fmt.Sprintf("updating subinstallation %q", t.Name), err)
		}
		s.remember(cur)
	}
	return nil
}

func subSpec(parent *lsv1alpha1.Installation, cv *componentVersion, bp *blueprint.Blueprint, t *blueprint.InstallationTemplate) (*lsv1alpha1.InstallationSpec, error) {
	spec := &lsv1alpha1.InstallationSpec{
		Context: parent.Spec.Context,
		Imports: t.Imports,
		Exports: t.Exports,
	}
	err := cv.subBlueprint(parent, bp, t, spec)
	if err != nil {
		return nil, err
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
