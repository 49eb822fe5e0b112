package tmpl

import (
	"fmt"
	"reflect"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// toYaml and fromYaml (sigs.k8s.io/yaml) allocate far more, for a moment,
// than they return: toYaml encodes its value as JSON, parses that with
// yaml.v2 into a node tree and a map[any]any and emits it again; fromYaml
// parses with yaml.v2, expands aliases, encodes the result as JSON and
// decodes that. toYaml of a list of 100 000 one-key maps (600 KB written out,
// within MaxStringBytes) allocated 526 MB, fromYaml of a 700 KB string 183
// MB, and 8 KB of YAML aliases 49 MB: a few such calls in a loop, or a few
// renders at once, exhausted the controller's memory, whatever the budget
// charged their results. So before the call, what it will allocate is
// estimated (from the measured value, or from the text) and held from the
// render's budget; a call it does not fit is refused before it runs, and the
// allowance is given back when it returns (only its result stays charged).
//
// The factors are the most TotalAlloc grew per unit in
// TestYAMLAllowancesCoverAllocations (Go 1.26, sigs.k8s.io/yaml v1.6.0),
// rounded up; that test fails if an allowance falls below what a call
// allocated. Calls over about 25 000 nodes are refused whatever the rest of
// the budget, so the costs were measured at 20 000 (at 100 000 nodes they
// are up to a quarter higher: maps and lists grow by doubling).
const (
	// toYaml: per node written out (a scalar, list, map, or map key)
	// 1 020–1 990 bytes (empty lists the most: the JSON text is parsed
	// back as YAML into a node tree); per byte of strings 13–27, and up to
	// 72 per byte that JSON escapes (control characters, <, >, &:
	// "\u0001" parsed back and escaped again as "\x01").
	toYamlNodeBytes    = 2600
	toYamlByteBytes    = 32
	toYamlEscapedBytes = 80
	// fromYaml: per byte of text 1 (comments) to 14 (a long string), and
	// 73 per '<', '>' or '&' (JSON writes them as \u003c ...); per node
	// counted by yamlNodesBound 117–490 (empty lists the least, a map of
	// 20 000 keys the most), and 484–654 nested 10 000 levels deep (the
	// most yaml.v2 accepts). An alias repeats its target's nodes, each
	// counted as two.
	fromYamlByteBytes    = 24
	fromYamlEscapedBytes = 80
	fromYamlNodeBytes    = 700
	// Text that may hold aliases ('*') is first parsed by yaml.v3 into a
	// node tree, whose aliases stay references, to count the nodes their
	// expansion makes; the parse takes up to 145 bytes a byte of text and
	// 220 a node counted by yamlNodesBound.
	nodeTreeByteBytes = 160
	nodeTreeNodeBytes = 240
)

// hold takes n bytes from the budget for function fn's allocations while it
// runs (guard gives them back after it returned), failing if they do not fit.
func (b *budget) hold(fn, what string, n int64) error {
	if n > b.left {
		return fmt.Errorf("%s would allocate about %d bytes while it runs (%s), more than the %d bytes left of the template's budget of %d", fn, n, what, max(b.left, 0), MaxRenderBytes)
	}
	b.left -= n
	b.held += n
	return b.backed(fn)
}

// release gives back what hold took.
func (b *budget) release() {
	b.left += b.held
	b.held = 0
}

// checkToYaml measures toYaml's argument like checkPrinted, then holds what
// encoding it takes.
func checkToYaml(b *budget, name string, args []reflect.Value) error {
	n, what, err := toYamlCost(name, args[0])
	if err != nil {
		return err
	}
	return b.hold(name, what, n)
}

// toYamlCost is what toYaml allocates encoding v, at most.
func toYamlCost(name string, v reflect.Value) (int64, string, error) {
	m := measurer{maxOut: MaxStringBytes, maxMem: unlimited, escapes: true}
	n, err := m.measure(v)
	if err != nil {
		return 0, "", printedErr(name, n, err)
	}
	cost := satAdd(satAdd(sat(n.nodes, toYamlNodeBytes), sat(n.out, toYamlByteBytes)), sat(n.escaped, toYamlEscapedBytes))
	return cost, fmt.Sprintf("%d nodes, %d bytes written out", n.nodes, n.out), nil
}

// checkFromYaml holds what decoding fromYaml's text takes.
func checkFromYaml(b *budget, name string, args []reflect.Value) error {
	n, what, err := b.fromYamlCost(name, args[0].String())
	if err != nil {
		return err
	}
	return b.hold(name, what, n)
}

// fromYamlCost is what fromYaml allocates decoding s, at most.
func (b *budget) fromYamlCost(name, s string) (int64, string, error) {
	nodes := yamlNodesBound(s)
	what := fmt.Sprintf("%d bytes of YAML, up to %d nodes", len(s), nodes)
	if strings.IndexByte(s, '*') >= 0 {
		copies, err := b.aliasCopies(name, s, nodes)
		if err != nil {
			return 0, "", err
		}
		if copies > 0 {
			what = fmt.Sprintf("%d bytes of YAML, up to %d nodes and %d more copied by its aliases", len(s), nodes, copies)
			nodes = satAdd(nodes, sat(copies, 2))
		}
	}
	var escaped int64
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '<' || c == '>' || c == '&' {
			escaped++
		}
	}
	cost := satAdd(satAdd(sat(int64(len(s)), fromYamlByteBytes), sat(escaped, fromYamlEscapedBytes)), sat(nodes, fromYamlNodeBytes))
	return cost, what, nil
}

// yamlNodesBound counts at most how many nodes YAML text s holds: every node
// but the first follows a ',', '[' or '{', a ':' before a blank, a
// bracket, a comma or after a quote, or a '-' or '?' before a blank; a key
// without a value makes a second node. Such characters inside a string are
// counted too: the bound is loose for text, tight for structure.
func yamlNodesBound(s string) int64 {
	var nodes int64
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',', '[', '{':
			nodes += 2
		case ':':
			if i+1 == len(s) || isYAMLBlankOrFlow(s[i+1]) || (i > 0 && (s[i-1] == '"' || s[i-1] == '\'')) {
				nodes += 2
			}
		case '-', '?':
			if i+1 == len(s) || isYAMLBlank(s[i+1]) {
				nodes += 2
			}
		}
	}
	return nodes + 1
}

func isYAMLBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isYAMLBlankOrFlow(c byte) bool {
	return isYAMLBlank(c) || c == ',' || c == '[' || c == ']' || c == '{' || c == '}'
}

// aliasCopies counts the nodes that the aliases in the first YAML document
// in s add when they are expanded (yaml.v2, under fromYaml, copies an
// alias's target each time: 8 KB of them made 400 000 nodes), parsing s with
// yaml.v3 into a node tree, which keeps aliases as references; nodes bounds
// the tree's nodes (yamlNodesBound). The parse's own allocations are held
// meanwhile. Text yaml.v3 cannot parse is refused: the aliases in it could
// not be counted (yaml.v2 would refuse it too in all but rare cases).
func (b *budget) aliasCopies(name, s string, nodes int64) (int64, error) {
	if err := b.hold(name, fmt.Sprintf("%d bytes of YAML parsed to count what its aliases copy", len(s)),
		satAdd(sat(int64(len(s)), nodeTreeByteBytes), sat(nodes, nodeTreeNodeBytes))); err != nil {
		return 0, err
	}
	defer b.release()
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal([]byte(s), &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	// Each node's count with its aliases expanded, computed once: an
	// alias of an alias of ... is counted without walking the expansion.
	// An anchor is known from where its node starts, so an alias inside
	// the node it names makes a cycle (which yaml.v2 refuses too).
	const counting = -1
	expanded := map[*yamlv3.Node]int64{}
	var own int64
	var cycle *yamlv3.Node
	var count func(n *yamlv3.Node) int64
	count = func(n *yamlv3.Node) int64 {
		switch c, ok := expanded[n]; {
		case ok && c == counting:
			cycle = n
			return 0
		case ok:
			return c
		}
		expanded[n] = counting
		var c int64
		switch n.Kind {
		case yamlv3.AliasNode:
			if n.Alias != nil {
				c = count(n.Alias)
			}
		case yamlv3.DocumentNode:
			for _, e := range n.Content {
				c = satAdd(c, count(e))
			}
		default:
			own++
			c = 1
			for _, e := range n.Content {
				c = satAdd(c, count(e))
			}
		}
		expanded[n] = c
		return c
	}
	total := count(&doc)
	if cycle != nil {
		return 0, fmt.Errorf("%s: anchor '%s' value contains itself", name, cycle.Anchor)
	}
	return max(total-own, 0), nil
}

func satAdd(a, b int64) int64 {
	if a > unlimited-b {
		return unlimited
	}
	return a + b
}
