package installation

import (
	"context"
	"errors"
	"reflect"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/kit/flow"
)

// ReasonImportExecutionFailed: an import execution rendered errors, the
// blueprint's own refusal of the imports.
const ReasonImportExecutionFailed = "ImportExecutionFailed"

// runImportExecutions runs the blueprint's import executions over the
// checked imports: their bindings join the imports every later render
// sees (deploy, subinstallation and export executions). The imports' hash
// stays that of the imports as read: the bindings follow from them.
func (im *imports) runImportExecutions(ctx context.Context, inst *lsv1alpha1.Installation, bp *blueprint.Blueprint) error {
	if len(bp.ImportExecutions) == 0 {
		return nil
	}
	rctx, cancel := renderContext(ctx)
	defer cancel()
	values := map[string]any{
		"imports":      im.values,
		"context":      im.configurations,
		"installation": map[string]any{"name": inst.Name, "namespace": inst.Namespace},
	}
	bound, err := bp.RunImportExecutions(rctx, values)
	var refused *blueprint.ImportExecutionError
	switch {
	case errors.As(err, &refused):
		return flow.StalledError(ReasonImportExecutionFailed, err)
	case err != nil:
		return templateFailure(err)
	}
	im.markBindingsFromSecrets(bound)
	im.values = bound
	return nil
}

// markBindingsFromSecrets treats every binding as read from a Secret when
// any import was: a binding may be derived from it, so its context copy is
// marked and its value redacted from messages like the Secret's.
func (im *imports) markBindingsFromSecrets(bound map[string]any) {
	if len(im.fromSecret) == 0 {
		return
	}
	for name, v := range bound {
		if old, ok := im.values[name]; ok && reflect.DeepEqual(old, v) {
			continue
		}
		im.fromSecret[name] = true
		im.secrets.add(v)
	}
}

// has says whether the installation has import name (data or target, a
// binding included).
func (im *imports) has(name string) bool {
	_, ok := im.values[name]
	return ok || im.isTarget(name)
}
