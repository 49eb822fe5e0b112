package blueprint

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// A deploy execution shaped like Landscaper's state example: a generated
// value is kept in the state and read back on the next render.
const stateBlueprint = `deployExecutions:
- name: default
  type: GoTemplate
  template: |
    {{- $password := default (randAlphaNum 16) .state.password }}
    deployItems:
    - name: app
      type: landscaper.gardener.cloud/mock
      config:
        password: {{ $password }}
    state:
      password: {{ $password }}
exportExecutions:
- name: default
  type: GoTemplate
  template: |
    exports:
      renders: {{ add1 (default 0 .state.renders) }}
    state:
      renders: {{ add1 (default 0 .state.renders) }}
`

func TestDeployExecutionStateIsReadBack(t *testing.T) {
	bp, err := Parse(map[string]string{"blueprint.yaml": stateBlueprint})
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{"imports": map[string]any{}}
	items, written, err := bp.DeployItemsWithState(context.Background(), values, ImportedTargets{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := written[DeployStateKey("default")].(map[string]any)
	password, _ := st["password"].(string)
	if len(password) != 16 || !strings.Contains(string(items[0].Config.Raw), password) {
		t.Fatalf("first render: state %v, config %s", written, items[0].Config.Raw)
	}
	state := bp.MergeState(nil, true, written)
	again, _, err := bp.DeployItemsWithState(context.Background(), values, ImportedTargets{}, state)
	if err != nil {
		t.Fatal(err)
	}
	if string(again[0].Config.Raw) != string(items[0].Config.Raw) {
		t.Fatalf("the second render did not reuse the state: %s, then %s", items[0].Config.Raw, again[0].Config.Raw)
	}
}

func TestExportExecutionStateIsKeptApartFromDeployState(t *testing.T) {
	bp, err := Parse(map[string]string{"blueprint.yaml": stateBlueprint})
	if err != nil {
		t.Fatal(err)
	}
	state := State{DeployStateKey("default"): map[string]any{"password": "p"}, DeployStateKey("removed"): 1, ExportStateKey("removed"): 2}
	for want := int64(1); want <= 2; want++ {
		exports, written, err := bp.RenderExportsWithState(context.Background(), map[string]any{}, state)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(exports["renders"]) != fmt.Sprint(want) {
			t.Fatalf("render %d exported %v", want, exports)
		}
		state = bp.MergeState(state, false, written)
	}
	if _, ok := state[ExportStateKey("removed")]; ok {
		t.Error("the state of an export execution the blueprint no longer has is kept")
	}
	if state[DeployStateKey("removed")] != 1 {
		t.Error("merging export states dropped deploy states")
	}
}

// Without state support `state:` was an unknown key; a misspelled key
// next to it is still refused.
func TestStateIsTheOnlyOtherKey(t *testing.T) {
	bp, err := Parse(map[string]string{"blueprint.yaml": "deployExecutions:\n- name: d\n  type: GoTemplate\n  template: |\n    deployItems: []\n    stat: {a: 1}\n"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = bp.DeployItemsWithState(context.Background(), map[string]any{}, ImportedTargets{}, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown top-level key(s) ["stat"]: it may have only "deployItems" (a list) and ["state"]`) {
		t.Fatalf("got %v", err)
	}
}
