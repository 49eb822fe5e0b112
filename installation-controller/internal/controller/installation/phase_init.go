package installation

import (
	"context"
	"errors"
	"fmt"
	"strings"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/installation-controller/internal/tmpl"
	"github.com/terrace-dev/terrace/kit/flow"
)

// parseBlueprint reads the installation's inline blueprint.
func parseBlueprint(inst *lsv1alpha1.Installation) (*blueprint.Blueprint, error) {
	if inst.Spec.Blueprint.Inline == nil {
		return nil, flow.Stalledf(ReasonBlueprintInvalid, "spec.blueprint.inline is missing: only inline blueprints are supported")
	}
	bp, err := blueprint.Parse(inst.Spec.Blueprint.Inline.Filesystem)
	if err != nil {
		return nil, flow.StalledError(ReasonBlueprintInvalid, fmt.Errorf("blueprint: %w", err))
	}
	return bp, nil
}

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
	bp, err := r.loadBlueprint(ctx, s)
	if err != nil {
		return "", err
	}
	if err := r.awaitPredecessors(ctx, s); err != nil {
		return "", err
	}
	var im *imports
	var items []lsv1alpha1.DeployItemTemplate
	var templates []blueprint.InstallationTemplate
	renders := len(bp.ImportExecutions)+len(bp.DeployExecutions)+len(bp.SubinstallationExecutions)+len(inst.Spec.ImportDataMappings) > 0
	rctx, err := s.component.renderContext(ctx, inst)
	if err != nil {
		return "", err
	}
	err = r.withRenderMark(rctx, s, renders, func(ctx context.Context) error {
		if im, err = r.resolveImports(ctx, inst, bp, fromAPIServer); err != nil {
			return err
		}
		s.secrets = im.secrets
		state, err := r.loadTemplateState(ctx, inst, len(bp.DeployExecutions))
		if err != nil {
			return err
		}
		var written blueprint.State
		if items, templates, written, err = render(ctx, inst, bp, im, state); err != nil {
			return err
		}
		return r.saveTemplateState(ctx, inst, bp, state, true, written)
	})
	if err != nil {
		return "", err
	}
	inst.Status.ImportsHash = im.hash
	if err := r.checkFanOut(ctx, inst, templates); err != nil {
		return "", err
	}
	if err := r.syncExecution(ctx, s, items); err != nil {
		return "", err
	}
	if err := r.syncSubInstallations(ctx, s, bp, templates); err != nil {
		return "", err
	}
	if err := r.syncContextCopies(ctx, s, im, len(templates) > 0); err != nil {
		return "", err
	}
	if len(s.handDeleted) > 0 || len(s.orphansGoing) > 0 {
		return "", waitf("%s", goneWaitMessage(s.handDeleted, s.orphansGoing))
	}
	return lsv1alpha1.PhaseCleanupOrphaned, nil
}

// awaitPredecessors waits while a predecessor has not finished the job, and
// ends the job when one failed, or when an interrupt reached it in Init.
func (r *Reconciler) awaitPredecessors(ctx context.Context, s *scope) error {
	msg, err := r.checkPredecessors(ctx, s.inst)
	switch {
	case s.interrupted:
		return interruptedInInit(msg, err)
	case err != nil:
		return err
	case msg != "":
		return waitf("%s", msg)
	}
	return nil
}

// render renders the blueprint with the imports: the execution's deploy
// items and the sub-installations' templates, within the reconcile's render
// deadline. Its errors never quote a secret import.
// The deploy executions read their template state from state and return
// the states they render.
func render(ctx context.Context, inst *lsv1alpha1.Installation, bp *blueprint.Blueprint, im *imports, state blueprint.State) ([]lsv1alpha1.DeployItemTemplate, []blueprint.InstallationTemplate, blueprint.State, error) {
	rctx, cancel := renderContext(ctx)
	defer cancel()
	items, templates, written, err := renderSubObjects(rctx, inst, bp, im, state)
	return items, templates, written, im.secrets.redactErr(err)
}

func renderSubObjects(ctx context.Context, inst *lsv1alpha1.Installation, bp *blueprint.Blueprint, im *imports, state blueprint.State) ([]lsv1alpha1.DeployItemTemplate, []blueprint.InstallationTemplate, blueprint.State, error) {
	values := map[string]any{
		"imports":      im.values,
		"context":      im.configurations,
		"installation": map[string]any{"name": inst.Name, "namespace": inst.Namespace},
	}
	items, written, err := bp.DeployItemsWithState(ctx, values, im.imported, state)
	if err != nil {
		return nil, nil, nil, templateFailure(err)
	}
	templates, err := bp.SubinstallationTemplatesContext(ctx, values)
	if err != nil {
		return nil, nil, nil, templateFailure(err)
	}
	bp.DropUnsatisfiedImports(templates, im.has)
	expandGroupRefs(templates, im)
	if err := blueprint.CheckSubinstallationImports(templates, im.dataImportNames(), im.targetImportNames(), im.groups); err != nil {
		return nil, nil, nil, templateFailure(err)
	}
	return items, templates, written, nil
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
// execution, the file and line, and quotes the offending snippet. A render
// that found the process-wide template budget held by other renders is
// retried instead: it may fit once they are done.
func templateFailure(err error) error {
	if errors.Is(err, tmpl.ErrBusy) {
		return fmt.Errorf("rendering waits for the process-wide template budget: %w", err)
	}
	return flow.StalledError(ReasonTemplateFailed, err)
}
