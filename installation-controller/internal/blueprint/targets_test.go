package blueprint

import (
	"strings"
	"testing"
)

// A deploy item's target.import resolves to the Target of a single import,
// the index-th of a targetList or the key's of a targetMap; anything else
// says what to write instead.
func TestImportedTargetsResolve(t *testing.T) {
	it := ImportedTargets{
		Single: map[string]string{"cluster": "c"},
		Lists:  map[string][]string{"clusters": {"red", "green"}},
		Maps:   map[string]map[string]string{"colors": {"blue": "b", "red": "r"}},
	}
	idx := func(i int) *int { return &i }
	for _, tc := range []struct {
		ref  itemTarget
		want string
		err  string
	}{
		{ref: itemTarget{Import: "cluster"}, want: "c"},
		{ref: itemTarget{Import: "clusters", Index: idx(1)}, want: "green"},
		{ref: itemTarget{Import: "colors", Key: "red"}, want: "r"},
		{ref: itemTarget{Import: "cluster", Key: "red"}, err: `target import "cluster" is a single target`},
		{ref: itemTarget{Import: "clusters"}, err: `target import "clusters" is a targetList: target.index says which of its 2 targets`},
		{ref: itemTarget{Import: "clusters", Index: idx(-1)}, err: `target.index -1: targetList import "clusters" has 2 targets (indexes 0 to 1)`},
		{ref: itemTarget{Import: "colors"}, err: `target import "colors" is a targetMap: target.key says which of its targets (keys: blue, red)`},
		{ref: itemTarget{Import: "colors", Key: "green"}, err: `target.key "green": targetMap import "colors" has no such key (its keys: blue, red)`},
		{ref: itemTarget{Import: "nosuch"}, err: `target import "nosuch" is not a target import of this installation`},
	} {
		got, err := it.resolve(&tc.ref)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%+v: want error %q, got %v", tc.ref, tc.err, err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%+v: want %q, got %q, %v", tc.ref, tc.want, got, err)
		}
	}
}

// targetList and targetMap imports parse; exports of those types, which
// Landscaper does not offer either, are refused; a targetType without a
// "/" is one of Landscaper's own.
func TestTargetListAndMapFields(t *testing.T) {
	bp, err := Parse(map[string]string{"blueprint.yaml": "imports:\n- {name: l, type: targetList, targetType: kubernetes-cluster}\n- {name: m, type: targetMap}\n"})
	if err != nil {
		t.Fatal(err)
	}
	if bp.Imports[0].Type != TypeTargetList || bp.Imports[0].TargetType != "landscaper.gardener.cloud/kubernetes-cluster" || bp.Imports[1].Type != TypeTargetMap {
		t.Errorf("parsed %+v", bp.Imports)
	}
	_, err = Parse(map[string]string{"blueprint.yaml": "exports:\n- {name: l, type: targetList}\n"})
	if err == nil || !strings.Contains(err.Error(), `export "l" has type "targetList": exports are "data" or "target"`) {
		t.Errorf("want the targetList export refused, got %v", err)
	}
	if g, ok := GroupOf(MapMember("colors", "blue")); !ok || g != "colors" {
		t.Errorf("GroupOf(MapMember) = %q, %v", g, ok)
	}
	if _, ok := GroupOf("cluster"); ok {
		t.Error("a plain name is no member")
	}
}

// A Target whose type is written short (kubernetes-cluster) satisfies an
// import that requires the full type, and the reverse; another group's
// type of the same name does not.
func TestShortTargetTypeSatisfiesTheImport(t *testing.T) {
	def := FieldDefinition{Name: "cluster", Type: TypeTarget, TargetType: "landscaper.gardener.cloud/kubernetes-cluster"}
	for typ, ok := range map[string]bool{
		"kubernetes-cluster":                           true,
		"landscaper.gardener.cloud/kubernetes-cluster": true,
		"example.com/kubernetes-cluster":               false,
	} {
		err := checkTargetImport(def, map[string]ProvidedTarget{"cluster": {Kind: TypeTarget, Types: map[string]string{"": typ}}})
		if (err == nil) != ok {
			t.Errorf("a Target of type %q: got %v", typ, err)
		}
	}
}
