package tmpl

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// allocatedBytes is allocated as an int64, garbage included: what the
// allowances in yaml.go must cover.
func allocatedBytes(f func()) int64 { return int64(allocated(f)) }

// yamlShapeCount is how many elements the shapes below have: enough for the
// per-element costs to dominate, few enough for the test to run in seconds.
const yamlShapeCount = 20000

func repeatList(n int, v func(i int) any) []any {
	l := make([]any, n)
	for i := range l {
		l[i] = v(i)
	}
	return l
}

// toYamlShapes are values of the shapes that cost toYaml the most per node or
// per byte.
func toYamlShapes() map[string]any {
	n := yamlShapeCount
	bigMap := map[string]any{}
	for i := range n {
		bigMap[fmt.Sprint(i)] = float64(i)
	}
	return map[string]any{
		"numbers":        repeatList(n, func(int) any { return float64(0) }),
		"empty strings":  repeatList(n, func(int) any { return "" }),
		"short strings":  repeatList(n, func(int) any { return "abcdefghij" }),
		"empty lists":    repeatList(n, func(int) any { return []any{} }),
		"empty maps":     repeatList(n, func(int) any { return map[string]any{} }),
		"one-key maps":   repeatList(n, func(int) any { return map[string]any{"a": float64(0)} }),
		"nested lists":   repeatList(n/10, func(int) any { return []any{[]any{[]any{[]any{nil}}}} }),
		"map":            bigMap,
		"booleans":       repeatList(n, func(int) any { return true }),
		"plain string":   strings.Repeat("x", 1<<19),
		"lines":          strings.Repeat("a\n", 1<<18),
		"control chars":  strings.Repeat("\x01", 1<<19),
		"html chars":     strings.Repeat("<", 1<<19),
		"quotes":         strings.Repeat(`"`, 1<<19),
		"line separator": strings.Repeat("\u2028", 1<<17),
		"non-ascii":      strings.Repeat("é", 1<<18),
	}
}

// fromYamlShapes are YAML texts of the shapes that cost fromYaml the most per
// byte or per node.
func fromYamlShapes() map[string]string {
	n := yamlShapeCount
	var blockMap strings.Builder
	for i := range n {
		fmt.Fprintf(&blockMap, "k%d: 0\n", i)
	}
	return map[string]string{
		"flow numbers":      "[" + strings.Repeat("0,", n) + "0]",
		"block numbers":     strings.Repeat("- 0\n", n),
		"flow empty maps":   "[" + strings.Repeat("{},", n) + "{}]",
		"flow empty lists":  "[" + strings.Repeat("[],", n) + "[]]",
		"flow one-key maps": "[" + strings.Repeat("{a: 0},", n) + "{}]",
		"keys only":         "{" + strings.Repeat("a,", n) + "a}",
		"json maps":         "[" + strings.Repeat(`{"a":0},`, n) + "{}]",
		"block map":         blockMap.String(),
		"block nulls":       strings.Repeat("-\n", n),
		"block nested":      strings.Repeat("- -\n", n),
		"flow strings":      "[" + strings.Repeat("'',", n) + "'']",
		"deep flow":         strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		"deep block":        strings.Repeat("- ", 10000) + "0",
		"plain string":      "a: " + strings.Repeat("x", 1<<19),
		"html string":       "a: x" + strings.Repeat("<", 1<<19),
		"escaped string":    `a: "` + strings.Repeat(`\x01`, 1<<17) + `"`,
		"literal lines":     "a: |\n" + strings.Repeat("  x\n", 1<<17),
		"comments":          strings.Repeat("#\n", 1<<18) + "a: 0",
		"aliases":           "a: &a [" + strings.Repeat("0,", 4000) + "0]\nb: [" + strings.Repeat("*a,", 98) + "*a]\n",
		"nested aliases":    "a: &a [" + strings.Repeat("0,", 199) + "0]\nb: &b [" + strings.Repeat("*a,", 9) + "*a]\nc: [" + strings.Repeat("*b,", 9) + "*b]\n",
		"merge keys":        "a: &a {" + strings.Repeat("k: 0, ", 1) + "l: 1}\nb: [" + strings.Repeat("{<<: *a},", 2000) + "{}]\n",
		"glob strings":      "[" + strings.Repeat("'*.example.com',", n) + "'']",
		"line separators":   `a: "` + strings.Repeat(`\u2028`, 1<<16) + `"`,
		"raw separators":    "a: x" + strings.Repeat("\u2028", 1<<17),
		"deep flow maps":    strings.Repeat("{a: ", 5000) + strings.Repeat("}", 5000),
		"non-ascii":         "a: " + strings.Repeat("é", 1<<18),
	}
}

// TestYAMLAllowancesCoverAllocations checks, for the costliest shapes found,
// that what toYaml and fromYaml allocate (TotalAlloc) stays within the
// allowance held for them, and logs the cost per unit the factors in
// yaml.go come from (go test -v).
func TestYAMLAllowancesCoverAllocations(t *testing.T) {
	for name, v := range toYamlShapes() {
		allowance, _, err := toYamlCost("toYaml", reflect.ValueOf(v))
		if err != nil {
			t.Fatalf("toYaml %s: %v", name, err)
		}
		n, _ := measure(reflect.ValueOf(v), unlimited, unlimited)
		got := allocatedBytes(func() {
			if _, err := toYAML(v); err != nil {
				t.Errorf("toYaml %s: %v", name, err)
			}
		})
		t.Logf("toYaml %-16s %7d nodes %8d bytes: allocated %10d, %5d a node, %4d a byte; allowance %10d", name, n.nodes, n.out, got, got/n.nodes, got/max(n.out, 1), allowance)
		if got > allowance {
			t.Errorf("toYaml %s allocated %d bytes, more than its allowance of %d", name, got, allowance)
		}
	}
	b := &budget{left: 1 << 40}
	for name, s := range fromYamlShapes() {
		allowance, _, err := b.fromYamlCost("fromYaml", s)
		if err != nil {
			t.Fatalf("fromYaml %s: %v", name, err)
		}
		nodes := yamlNodesBound(s)
		got := allocatedBytes(func() {
			if _, err := fromYAML(s); err != nil {
				t.Errorf("fromYaml %s: %v", name, err)
			}
		})
		t.Logf("fromYaml %-17s %7d bytes %7d nodes at most: allocated %10d, %4d a byte, %4d a node; allowance %10d", name, len(s), nodes, got, got/int64(len(s)), got/nodes, allowance)
		if got > allowance {
			t.Errorf("fromYaml %s allocated %d bytes, more than its allowance of %d", name, got, allowance)
		}
		if strings.Contains(s, "*") {
			tree := allocatedBytes(func() {
				if _, err := b.aliasCopies("fromYaml", s, nodes); err != nil {
					t.Errorf("fromYaml %s: %v", name, err)
				}
			})
			treeAllowance := sat(int64(len(s)), nodeTreeByteBytes) + sat(nodes, nodeTreeNodeBytes)
			t.Logf("fromYaml %-17s node tree: allocated %10d, %4d a byte, %4d a node; allowance %10d", name, tree, tree/int64(len(s)), tree/nodes, treeAllowance)
			if tree > treeAllowance {
				t.Errorf("fromYaml %s: counting its aliases allocated %d bytes, more than its allowance of %d", name, tree, treeAllowance)
			}
		}
	}
}
