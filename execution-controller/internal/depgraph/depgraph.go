package depgraph

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Graph maps an item name to the names it depends on.
type Graph map[string][]string

// UnknownDependencyError reports dependsOn entries naming no item.
type UnknownDependencyError struct {
	// Missing maps an item to the dependencies that name no item, sorted.
	Missing map[string][]string
}

func (e *UnknownDependencyError) Error() string {
	items := make([]string, 0, len(e.Missing))
	for item := range e.Missing {
		items = append(items, item)
	}
	sort.Strings(items)
	parts := make([]string, 0, len(items))
	for _, item := range items {
		parts = append(parts, fmt.Sprintf("%s depends on unknown %s", item, strings.Join(e.Missing[item], ", ")))
	}
	return "unknown dependencies: " + strings.Join(parts, "; ")
}

// CycleError reports a dependency cycle.
type CycleError struct {
	// Cycle lists the items of one cycle in dependency order; the first item
	// is repeated at the end (a → b → a).
	Cycle []string
}

func (e *CycleError) Error() string {
	return "cyclic dependencies: " + strings.Join(e.Cycle, " -> ")
}

// Validate checks that every dependency names an item of the graph and that
// there is no cycle. An *UnknownDependencyError wins over a *CycleError, since
// a cycle through a missing item cannot be reported meaningfully.
func (g Graph) Validate() error {
	missing := map[string][]string{}
	for item, deps := range g {
		for _, d := range deps {
			if _, ok := g[d]; !ok {
				missing[item] = append(missing[item], d)
			}
		}
	}
	if len(missing) > 0 {
		for item := range missing {
			sort.Strings(missing[item])
		}
		return &UnknownDependencyError{Missing: missing}
	}
	if c := g.findCycle(); c != nil {
		return &CycleError{Cycle: c}
	}
	return nil
}

// findCycle runs a depth-first search in name order (so the reported cycle
// is deterministic) and returns the first cycle it meets.
func (g Graph) findCycle() []string {
	const (
		unvisited = iota
		onStack
		done
	)
	state := make(map[string]int, len(g))
	var stack []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = onStack
		stack = append(stack, n)
		deps := slices.Clone(g[n])
		sort.Strings(deps)
		for _, d := range deps {
			switch state[d] {
			case onStack:
				i := slices.Index(stack, d)
				return append(slices.Clone(stack[i:]), d)
			case unvisited:
				if _, ok := g[d]; !ok {
					continue
				}
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		return nil
	}
	for _, n := range g.names() {
		if state[n] == unvisited {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

func (g Graph) names() []string {
	out := make([]string, 0, len(g))
	for n := range g {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Order returns the items so that every item comes after all it depends on;
// ties are broken by name. The graph must be valid (see Validate).
func (g Graph) Order() []string {
	indegree := make(map[string]int, len(g))
	dependents := map[string][]string{}
	for n, deps := range g {
		indegree[n] += 0
		for _, d := range deps {
			if _, ok := g[d]; !ok {
				continue
			}
			indegree[n]++
			dependents[d] = append(dependents[d], n)
		}
	}
	var ready []string
	for n, deg := range indegree {
		if deg == 0 {
			ready = append(ready, n)
		}
	}
	out := make([]string, 0, len(g))
	for len(ready) > 0 {
		sort.Strings(ready)
		n := ready[0]
		ready = ready[1:]
		out = append(out, n)
		for _, m := range dependents[n] {
			indegree[m]--
			if indegree[m] == 0 {
				ready = append(ready, m)
			}
		}
	}
	return out
}

// Startable returns, in name order, the items that have not started yet and
// whose dependencies have all succeeded.
func (g Graph) Startable(started, succeeded func(string) bool) []string {
	var out []string
	for _, n := range g.names() {
		if started(n) {
			continue
		}
		ok := true
		for _, d := range g[n] {
			if !succeeded(d) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, n)
		}
	}
	return out
}

// Deletable returns, in name order, the items of g that no other item of g
// depends on: the ones that may be deleted now when deleting in reverse
// dependency order. Dependencies naming items outside g are ignored (they
// are already gone). In a cycle nothing is deletable; callers treat the
// whole remainder as deletable then, so a broken graph cannot block deletion.
func (g Graph) Deletable() []string {
	needed := map[string]bool{}
	for _, deps := range g {
		for _, d := range deps {
			needed[d] = true
		}
	}
	var out []string
	for _, n := range g.names() {
		if !needed[n] {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return g.names()
	}
	return out
}
