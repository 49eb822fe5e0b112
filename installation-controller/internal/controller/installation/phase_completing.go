package installation

import (
	"context"

	"k8s.io/apimachinery/pkg/util/sets"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/kit/flow"
)

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
	bp, err := r.loadBlueprint(ctx, s)
	if err != nil {
		return "", err
	}
	var im *imports
	var exports map[string]any
	renders := len(bp.ExportExecutions)+len(inst.Spec.ExportDataMappings)+len(inst.Spec.ImportDataMappings) > 0
	rctx, err := s.component.renderContext(ctx, inst)
	if err != nil {
		return "", err
	}
	err = r.withRenderMark(rctx, s, renders, func(ctx context.Context) error {
		if im, err = r.unchangedImports(ctx, inst, bp); err != nil {
			return err
		}
		s.secrets = im.secrets
		exports, err = r.computeExports(ctx, inst, bp, im)
		return err
	})
	if err != nil {
		return "", err
	}
	if err := r.writeExports(ctx, inst, exports); err != nil {
		return "", err
	}
	if err := r.deleteStaleAfterJob(ctx, inst, im); err != nil {
		return "", err
	}
	if err := r.triggerSuccessors(ctx, inst); err != nil {
		return "", err
	}
	return lsv1alpha1.PhaseSucceeded, nil
}

// unchangedImports resolves the imports and ends the job when they are not
// those it started with.
func (r *Reconciler) unchangedImports(ctx context.Context, inst *lsv1alpha1.Installation, bp *blueprint.Blueprint) (*imports, error) {
	im, err := r.currentImports(ctx, inst, bp)
	if err != nil {
		if isStalled(err) {
			return nil, flow.Stalledf(ReasonImportsChanged, "the imports changed during the job: %v", err)
		}
		return nil, err
	}
	if im.hash != inst.Status.ImportsHash {
		return nil, flow.Stalledf(ReasonImportsChanged,
			"the imports changed during the job: add the reconcile annotation to the root installation to start a job with the new imports")
	}
	return im, nil
}

// deleteStaleAfterJob deletes the exports the spec no longer has and the
// context copies no longer needed.
func (r *Reconciler) deleteStaleAfterJob(ctx context.Context, inst *lsv1alpha1.Installation, im *imports) error {
	if err := r.deleteStale(ctx, inst, writtenExports, sets.New(exportKeys(inst)...)); err != nil {
		return err
	}
	// Target copies of imports this installation no longer has, which Init
	// kept: every sub-installation has finished the job now, so the deploy
	// items of the last job that named them are uninstalled. The same rule
	// as in Init: with no sub-installation, no copies.
	contextKeep := sets.New[string]()
	if len(inst.Status.InstallationReferences) > 0 {
		contextKeep = contextCopyKeys(inst, im)
	}
	return r.deleteStale(ctx, inst, writtenContextCopies, contextKeep)
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
