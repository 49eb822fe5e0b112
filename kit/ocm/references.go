package ocm

import (
	"context"
	"fmt"
	"strings"
)

// ResolvedComponents are the component versions reachable from a root by
// component references, keyed by "<name>:<version>".
type ResolvedComponents map[string]*ComponentDescriptor

// ResolveReferences reads the component versions cd references, and
// theirs, from repo, at most MaxReferenceDepth deep and MaxComponents in
// all. A reference cycle is an error naming the path. The result includes
// cd.
func ResolveReferences(ctx context.Context, repo *Repository, cd *ComponentDescriptor) (ResolvedComponents, error) {
	limits := repo.Limits.withDefaults()
	out := ResolvedComponents{cd.Key(): cd}
	// walked holds the versions whose references are all read, so that a
	// version many others reference is walked once.
	walked := map[string]bool{}
	var walk func(parent *ComponentDescriptor, path []string) error
	walk = func(parent *ComponentDescriptor, path []string) error {
		for _, ref := range parent.Component.References {
			key := ref.ComponentName + ":" + ref.Version
			for _, p := range path {
				if p == key {
					return fmt.Errorf("component references form a cycle: %s -> %s", strings.Join(path, " -> "), key)
				}
			}
			if len(path) >= limits.MaxReferenceDepth {
				return fmt.Errorf("component references of %s are nested deeper than %d (--ocm-max-reference-depth): %s -> %s", path[0], limits.MaxReferenceDepth, strings.Join(path, " -> "), key)
			}
			child, ok := out[key]
			if !ok {
				if len(out) >= limits.MaxComponents {
					return fmt.Errorf("component %s references more than %d component versions in all (--ocm-max-components)", path[0], limits.MaxComponents)
				}
				var err error
				child, err = Resolve(ctx, repo, ref.ComponentName, ref.Version)
				if err != nil {
					return fmt.Errorf("component reference %q of %s: %w", ref.Name, parent.Key(), err)
				}
				out[key] = child
			}
			if walked[key] {
				continue
			}
			if err := walk(child, append(append([]string{}, path...), key)); err != nil {
				return err
			}
		}
		walked[parent.Key()] = true
		return nil
	}
	if err := walk(cd, []string{cd.Key()}); err != nil {
		return nil, err
	}
	return out, nil
}
