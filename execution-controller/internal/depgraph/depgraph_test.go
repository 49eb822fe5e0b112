package depgraph

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

func TestOrderChainAndDiamond(t *testing.T) {
	for name, tc := range map[string]struct {
		g    Graph
		want []string
	}{
		"chain":                     {Graph{"c": {"b"}, "b": {"a"}, "a": nil}, []string{"a", "b", "c"}},
		"diamond":                   {Graph{"top": nil, "left": {"top"}, "right": {"top"}, "bottom": {"left", "right"}}, []string{"top", "left", "right", "bottom"}},
		"independent items by name": {Graph{"z": nil, "m": nil, "a": nil}, []string{"a", "m", "z"}},
		"empty":                     {Graph{}, []string{}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tc.g.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := tc.g.Order(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Order = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidateCycles(t *testing.T) {
	for name, tc := range map[string]struct {
		g    Graph
		want []string
	}{
		"two":       {Graph{"a": {"b"}, "b": {"a"}}, []string{"a", "b", "a"}},
		"self":      {Graph{"a": {"a"}}, []string{"a", "a"}},
		"three":     {Graph{"a": {"c"}, "b": {"a"}, "c": {"b"}, "d": {"a"}}, []string{"a", "c", "b", "a"}},
		"off chain": {Graph{"x": nil, "y": {"x", "z"}, "z": {"y"}}, []string{"y", "z", "y"}},
	} {
		t.Run(name, func(t *testing.T) {
			var ce *CycleError
			if err := tc.g.Validate(); !errors.As(err, &ce) {
				t.Fatalf("Validate = %v, want a CycleError", err)
			}
			if !reflect.DeepEqual(ce.Cycle, tc.want) {
				t.Errorf("cycle = %v, want %v", ce.Cycle, tc.want)
			}
		})
	}
}

func TestValidateUnknown(t *testing.T) {
	g := Graph{"a": {"ghost", "b"}, "b": {"a"}} // unknown wins over the cycle
	var ue *UnknownDependencyError
	err := g.Validate()
	if !errors.As(err, &ue) {
		t.Fatalf("Validate = %v, want an UnknownDependencyError", err)
	}
	if !reflect.DeepEqual(ue.Missing, map[string][]string{"a": {"ghost"}}) {
		t.Errorf("missing = %v", ue.Missing)
	}
	if want := "unknown dependencies: a depends on unknown ghost"; err.Error() != want {
		t.Errorf("message = %q, want %q", err.Error(), want)
	}
}

func TestStartable(t *testing.T) {
	g := Graph{"top": nil, "left": {"top"}, "right": {"top"}, "bottom": {"left", "right"}}
	set := func(names ...string) func(string) bool {
		return func(n string) bool { return slices.Contains(names, n) }
	}

	if got := g.Startable(set(), set()); !reflect.DeepEqual(got, []string{"top"}) {
		t.Errorf("nothing started: %v", got)
	}
	if got := g.Startable(set("top"), set()); got != nil {
		t.Errorf("top running: %v, want none", got)
	}
	if got := g.Startable(set("top"), set("top")); !reflect.DeepEqual(got, []string{"left", "right"}) {
		t.Errorf("top succeeded: %v", got)
	}
	if got := g.Startable(set("top", "left", "right"), set("top", "left")); got != nil {
		t.Errorf("right still running: %v, want none", got)
	}
	if got := g.Startable(set("top", "left", "right"), set("top", "left", "right")); !reflect.DeepEqual(got, []string{"bottom"}) {
		t.Errorf("all but bottom succeeded: %v", got)
	}
}

func TestDeletable(t *testing.T) {
	chain := Graph{"a": nil, "b": {"a"}, "c": {"b"}}
	if got := chain.Deletable(); !reflect.DeepEqual(got, []string{"c"}) {
		t.Errorf("chain: %v, want [c]", got)
	}
	delete(chain, "c")
	if got := chain.Deletable(); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("chain without c: %v, want [b]", got)
	}
	diamond := Graph{"top": nil, "left": {"top"}, "right": {"top"}, "bottom": {"left", "right"}}
	if got := diamond.Deletable(); !reflect.DeepEqual(got, []string{"bottom"}) {
		t.Errorf("diamond: %v", got)
	}
	delete(diamond, "bottom")
	if got := diamond.Deletable(); !reflect.DeepEqual(got, []string{"left", "right"}) {
		t.Errorf("diamond without bottom: %v", got)
	}
	// dependencies on items already gone do not block
	if got := (Graph{"b": {"a"}}).Deletable(); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("dangling: %v", got)
	}
	// a cycle cannot block deletion for ever
	if got := (Graph{"a": {"b"}, "b": {"a"}}).Deletable(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("cycle: %v", got)
	}
}
