package blueprint

import (
	"fmt"
	"sort"
	"strings"
)

// SanitizeName turns a sub-installation template name into the part of the
// sub-installation's object name the controller derives from it (lower case,
// characters outside [a-z0-9.-] replaced by '-', trimmed of '-' and '.').
// It must stay the function the controller's object names use, so that
// checkSubinstallations refuses exactly the templates whose objects would
// collide.
func SanitizeName(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	return strings.Trim(b.String(), "-.")
}

// valueKind tells DataObjects from Targets: a data ref and a target of the
// same name are different objects in the parent's context.
type valueKind string

const (
	kindData   valueKind = "data"
	kindTarget valueKind = "target"
	// A whole targetList or targetMap import of the parent (targetListRef,
	// targetMapRef): only the parent provides one.
	kindTargetList valueKind = TypeTargetList
	kindTargetMap  valueKind = TypeTargetMap
)

type valueRef struct {
	kind valueKind
	name string
}

func (v valueRef) String() string { return fmt.Sprintf("%s %q", v.kind, v.name) }

// checkSubinstallations validates the sub-installations of one parent
// against each other (sorted by name). Each rule refuses a set the controller
// could only run wrongly: two templates of one object name (creation fails
// "already exists" for ever), two writers of one value in the parent's
// context (last writer wins, silently), and siblings importing each other's
// exports (each waits for the other in Init for ever).
func (b *Blueprint) checkSubinstallations(subs []InstallationTemplate) error {
	byObject := map[string]string{}
	for i, t := range subs {
		if i > 0 && subs[i-1].Name == t.Name {
			return fmt.Errorf("subinstallation %q is defined twice", t.Name)
		}
		key := SanitizeName(t.Name)
		if prev, ok := byObject[key]; ok {
			return fmt.Errorf("subinstallations %q and %q get the same object name (%q once characters outside [a-z0-9.-] are replaced): rename one", prev, t.Name, key)
		}
		byObject[key] = t.Name
	}

	// The parent writes its own imports into the context its children read.
	parentImports := map[valueRef]bool{}
	for _, d := range b.Imports {
		kind := kindData
		if IsTargetType(d.Type) {
			kind = kindTarget
		}
		parentImports[valueRef{kind, d.Name}] = true
	}
	exporter := map[valueRef]string{}
	for _, t := range subs {
		for _, ref := range exportRefs(t) {
			if parentImports[ref] {
				return fmt.Errorf("subinstallation %q exports %s, which is an import of this blueprint in the context its subinstallations share: rename the export", t.Name, ref)
			}
			if prev, ok := exporter[ref]; ok && prev != t.Name {
				return fmt.Errorf("subinstallations %q and %q both export %s: each value of the context they share needs one writer", prev, t.Name, ref)
			}
			exporter[ref] = t.Name
		}
	}
	return checkImportCycles(subs, exporter)
}

func exportRefs(t InstallationTemplate) []valueRef {
	var refs []valueRef
	for _, d := range t.Exports.Data {
		refs = append(refs, valueRef{kindData, d.DataRef})
	}
	for _, tg := range t.Exports.Targets {
		refs = append(refs, valueRef{kindTarget, tg.Target})
	}
	return refs
}

func importRefs(t InstallationTemplate) []valueRef {
	var refs []valueRef
	for _, d := range t.Imports.Data {
		if d.DataRef != "" {
			refs = append(refs, valueRef{kindData, d.DataRef})
		}
	}
	for _, tg := range t.Imports.Targets {
		switch {
		case tg.Target != "":
			refs = append(refs, valueRef{kindTarget, tg.Target})
		case tg.TargetListReference != "":
			refs = append(refs, valueRef{kindTargetList, tg.TargetListReference})
		case tg.TargetMapReference != "":
			refs = append(refs, valueRef{kindTargetMap, tg.TargetMapReference})
		}
		for _, name := range tg.Targets {
			refs = append(refs, valueRef{kindTarget, name})
		}
		for _, key := range sortedKeys(tg.TargetMap) {
			refs = append(refs, valueRef{kindTarget, tg.TargetMap[key]})
		}
	}
	return refs
}

// edge is "from imports ref, which to exports".
type edge struct {
	to  string
	ref valueRef
}

// checkImportCycles refuses siblings that (transitively) import each other's
// exports: a sub-installation waits in Init for the siblings whose exports
// it imports, so a cycle would never start. Importing one's own export is
// not a wait (the controller skips the installation itself).
func checkImportCycles(subs []InstallationTemplate, exporter map[valueRef]string) error {
	edges := map[string][]edge{}
	for _, t := range subs {
		for _, ref := range importRefs(t) {
			if from, ok := exporter[ref]; ok && from != t.Name {
				edges[t.Name] = append(edges[t.Name], edge{to: from, ref: ref})
			}
		}
		sort.SliceStable(edges[t.Name], func(i, j int) bool { return edges[t.Name][i].to < edges[t.Name][j].to })
	}
	const (
		unvisited = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var pathRefs []valueRef
	var visit func(n string) error
	visit = func(n string) error {
		state[n] = onPath
		path = append(path, n)
		for _, e := range edges[n] {
			pathRefs = append(pathRefs, e.ref)
			switch state[e.to] {
			case onPath:
				return cycleError(path, pathRefs, e.to)
			case unvisited:
				if err := visit(e.to); err != nil {
					return err
				}
			}
			pathRefs = pathRefs[:len(pathRefs)-1]
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	for _, t := range subs {
		if state[t.Name] == unvisited {
			if err := visit(t.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// cycleError names each step of the cycle that starts at start: path[i]
// imports refs[i], which path[i+1] (or start, for the last) exports.
func cycleError(path []string, refs []valueRef, start string) error {
	i := 0
	for path[i] != start {
		i++
	}
	var steps []string
	for j := i; j < len(path); j++ {
		next := start
		if j+1 < len(path) {
			next = path[j+1]
		}
		steps = append(steps, fmt.Sprintf("%q imports %s exported by %q", path[j], refs[j], next))
	}
	return fmt.Errorf("subinstallations import each other's exports in a cycle, so none of them can start: %s", strings.Join(steps, ", "))
}

// CheckSubinstallationImports refuses a sub-installation import (a dataRef or
// target) that nothing in the parent's context provides: neither an import of
// the parent (its context copy, dataImports and targetImports: the names the
// parent resolved for this job, data and target apart) nor an export of a
// sibling. Such an import would read whatever the context happens to hold
// (a stale copy a past job left, or nothing), so its outcome would depend on
// timing; the context belongs to the parent, and nothing else writes it
// (Landscaper: a sub-installation's imports are its parent's imports or its
// siblings' exports). Secret and ConfigMap imports are not in the context and
// are not checked.
func CheckSubinstallationImports(subs []InstallationTemplate, dataImports, targetImports []string, targetGroups map[string]string) error {
	provided := map[valueRef]string{}
	for _, n := range dataImports {
		provided[valueRef{kindData, n}] = "parent"
	}
	for _, n := range targetImports {
		provided[valueRef{kindTarget, n}] = "parent"
	}
	for n, kind := range targetGroups {
		provided[valueRef{valueKind(kind), n}] = "parent"
	}
	for _, t := range subs {
		for _, ref := range exportRefs(t) {
			provided[ref] = t.Name
		}
	}
	for _, t := range subs {
		for _, ref := range importRefs(t) {
			if _, ok := provided[ref]; ok {
				continue
			}
			if ref.kind == kindTargetList || ref.kind == kindTargetMap {
				return fmt.Errorf("subinstallation %q imports %s, which is not a %s import of this installation (%s)",
					t.Name, ref, ref.kind, describeGroups(ref.kind, targetGroups))
			}
			return fmt.Errorf("subinstallation %q imports %s, which nothing in the context of its parent provides: it is neither an import of this installation (%s) nor an export of a sibling; import it in this installation or export it from a sibling",
				t.Name, ref, describeNames(ref.kind, dataImports, targetImports))
		}
	}
	return nil
}

// describeGroups lists the parent's targetList or targetMap imports.
func describeGroups(kind valueKind, groups map[string]string) string {
	var names []string
	for n, k := range groups {
		if valueKind(k) == kind {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("it has no %s imports", kind)
	}
	sort.Strings(names)
	return fmt.Sprintf("its %s imports are %s", kind, strings.Join(names, ", "))
}

// describeNames lists the parent's imports of one kind for messages.
func describeNames(kind valueKind, data, targets []string) string {
	names := data
	if kind == kindTarget {
		names = targets
	}
	if len(names) == 0 {
		return fmt.Sprintf("it has no %s imports", kind)
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	return fmt.Sprintf("its %s imports are %s", kind, strings.Join(sorted, ", "))
}
