package blueprint

import (
	"context"
	"strings"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/tmpl"
)

// State is an installation's template state: what each deploy and export
// execution rendered under `state:` the last time it rendered one, by
// execution (DeployStateKey, ExportStateKey). The execution reads it back as
// .state, so a value it generated once (a password, a key) stays the same.
type State map[string]any

// stateKey is the top-level key under which an execution renders its state.
const stateKey = "state"

// Prefixes of the state keys: deploy and export executions of one name
// keep states of their own.
const (
	deployStatePrefix = "deploy/"
	exportStatePrefix = "export/"
)

// DeployStateKey is the state key of the deploy execution name.
func DeployStateKey(name string) string { return deployStatePrefix + name }

// ExportStateKey is the state key of the export execution name.
func ExportStateKey(name string) string { return exportStatePrefix + name }

// withState returns values with .state set to the execution's state, an
// empty mapping when it has none yet (so `.state.x` renders as missing).
func withState(values map[string]any, state any) map[string]any {
	in := make(map[string]any, len(values)+1)
	for k, v := range values {
		in[k] = v
	}
	if state == nil {
		state = map[string]any{}
	}
	in[stateKey] = state
	return in
}

// recordState keeps the state an execution rendered, if it rendered one.
func recordState(doc map[string]any, key string, written State) {
	if written == nil {
		return
	}
	if v, ok := doc[stateKey]; ok {
		written[key] = normalize(v)
	}
}

// DeployItemsWithState is DeployItemsContext with template state: each deploy
// execution sees its entry of prev as .state; the states they render are
// returned by key.
func (b *Blueprint) DeployItemsWithState(ctx context.Context, values map[string]any, targets ImportedTargets, prev State) ([]lsv1alpha1.DeployItemTemplate, State, error) {
	written := State{}
	items, err := b.deployItems(ctx, values, targets, prev, written)
	return items, written, err
}

// RenderExportsWithState is RenderExportsContext with template state, as
// DeployItemsWithState.
func (b *Blueprint) RenderExportsWithState(ctx context.Context, values map[string]any, prev State, collections ...tmpl.Collection) (map[string]any, State, error) {
	written := State{}
	exports, err := b.renderExports(ctx, values, prev, written, collections)
	return exports, written, err
}

// MergeState returns prev updated with what the deploy executions (deploy
// true) or the export executions wrote: the other kind's entries stay, this
// kind's entries of executions the blueprint no longer has are dropped,
// and the others are kept unless the execution wrote a new state.
func (b *Blueprint) MergeState(prev State, deploy bool, written State) State {
	prefix, execs, keyOf := exportStatePrefix, b.ExportExecutions, ExportStateKey
	if deploy {
		prefix, execs, keyOf = deployStatePrefix, b.DeployExecutions, DeployStateKey
	}
	current := map[string]bool{}
	for _, ex := range execs {
		current[keyOf(ex.Name)] = true
	}
	out := State{}
	for k, v := range prev {
		if !strings.HasPrefix(k, prefix) || current[k] {
			out[k] = v
		}
	}
	for k, v := range written {
		out[k] = v
	}
	return out
}
