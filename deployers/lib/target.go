package lib

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/stale"
)

// checkResponsibility decides whether this deployer serves the item: its
// Target must match the TargetSelector, unless DuringResponsibilityCheck
// hooks decide otherwise. An item the deployer does not serve ends the
// reconcile before anything is written.
func (r *Reconciler) checkResponsibility(ctx context.Context, s *scope) (flow.Result, error) {
	responsible, err := r.resolveTarget(ctx, s)
	if err != nil {
		return flow.Stop(), err
	}
	hr, err := r.executeHooks(ctx, s, extension.DuringResponsibilityCheckHook)
	if err != nil {
		return flow.Stop(), err
	}
	if hr != nil {
		s.hookResult = extension.AggregateHookResults(extension.DuringResponsibilityCheckHook, s.hookResult, hr)
		responsible = !hr.AbortReconcile
	}
	if responsible {
		return flow.Continue(), nil
	}
	s.log.V(1).Info("not responsible for deploy item")
	if d := s.orig.Status.Deployer; d != nil && d.Name == r.opts.Name && d.Identity == r.opts.Identity {
		// Served by this deployer before (its Target moved): its series go.
		r.forget(s.req.NamespacedName)
	}
	return flow.Stop(), nil
}

// resolveTarget reads the item's Target and reports whether it matches the
// deployer's selector. Target problems of an item the deployer serves are
// kept in s.targetErr and fail the job later, so they are reported.
func (r *Reconciler) resolveTarget(ctx context.Context, s *scope) (bool, error) {
	if s.item.Spec.Type != r.opts.Type {
		return false, nil
	}
	// An item without a (readable) Target is served as if its Target had no
	// annotations and labels: the deployer of the default environment (no
	// selector, or one like "!landscaper.gardener.cloud/environment") reports
	// the problem, deployers of fenced environments stay silent.
	selective := !r.opts.TargetSelector.Matches(&lsv1alpha1.Target{})
	ref := s.item.Spec.Target
	if ref == nil {
		if r.opts.TargetType != "" {
			s.targetErr = ConfigError(ReasonTargetNotFound, "spec.target: deploy items of type %s need a Target of type %s", r.opts.Type, r.opts.TargetType)
		}
		return !selective, nil
	}
	if ref.Namespace != "" && ref.Namespace != s.item.Namespace {
		s.targetErr = ConfigError(ReasonTargetNamespace, "spec.target: Target %s/%s is in another namespace than the deploy item (%s); only Targets in the item's own namespace may be used", ref.Namespace, ref.Name, s.item.Namespace)
		return !selective, nil
	}
	target := &lsv1alpha1.Target{}
	// Read from the API server when the cache does not show it (stale.Get):
	// a Target created right before its item must not fail the job.
	if err := stale.Get(ctx, r.client, r.reader, types.NamespacedName{Namespace: s.item.Namespace, Name: ref.Name}, target); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("reading Target %s/%s: %w", s.item.Namespace, ref.Name, err)
		}
		s.targetErr = ConfigError(ReasonTargetNotFound, "spec.target: Target %s/%s not found", s.item.Namespace, ref.Name)
		return !selective, nil
	}
	// The Target is kept also when the selector does not match: a
	// DuringResponsibilityCheck hook may still make the deployer responsible,
	// and the deployer then gets the item's Target like any other.
	s.target = target
	if r.opts.TargetType != "" && !SameTargetType(target.Spec.Type, r.opts.TargetType) {
		s.targetErr = ConfigError(ReasonTargetType, "Target %s/%s has type %q; deploy items of type %s need type %q", target.Namespace, target.Name, target.Spec.Type, r.opts.Type, r.opts.TargetType)
	}
	return r.opts.TargetSelector.Matches(target), nil
}

// checkContext verifies that the item's Context exists; a missing Context
// named "default" counts as empty (the brief), any other is a configuration
// error kept in s.targetErr. A Target problem found first wins.
func (r *Reconciler) checkContext(ctx context.Context, s *scope) (flow.Result, error) {
	name := s.item.Spec.Context
	if s.targetErr != nil || name == "" || name == lsv1alpha1.DefaultContextName {
		return flow.Continue(), nil
	}
	key := types.NamespacedName{Namespace: s.item.Namespace, Name: name}
	if err := stale.Get(ctx, r.client, r.reader, key, &lsv1alpha1.Context{}); err != nil {
		if !apierrors.IsNotFound(err) {
			return flow.Stop(), fmt.Errorf("reading Context %s/%s: %w", key.Namespace, name, err)
		}
		s.targetErr = ConfigError(ReasonContextNotFound, "spec.context: Context %s/%s not found", key.Namespace, name)
	}
	return flow.Continue(), nil
}

// missingTargetHint ends the lastError message of an install job that failed
// because its Target does not exist.
var missingTargetHint = fmt.Sprintf("; create it, then retry with the annotation %s: %s (or let the next job of the item's execution pick it up)",
	lsv1alpha1.OperationAnnotation, lsv1alpha1.OperationReconcile)

// SameTargetType reports whether two Target types name the same type, the
// short and the full form of a Landscaper type alike.
func SameTargetType(a, b string) bool {
	return lsv1alpha1.FullTargetType(a) == lsv1alpha1.FullTargetType(b)
}
