package components

import (
	"context"
	"fmt"
	"strings"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/ocm"
)

// resolveReferences reads the versions cv.Root's component references
// reach, each from the repository of the version that references it (after
// overwrites), at most MaxReferenceDepth deep and MaxComponents in all; a
// cycle is an error naming its path. It mirrors ocm.ResolveReferences, with
// the cache and the overwrites.
func (r *Resolver) resolveReferences(ctx context.Context, cv *ComponentVersion, overwrites []lsv1alpha1.ComponentVersionOverwrite, creds *ocm.DockerConfig) error {
	maxDepth, maxComponents := r.opts.Limits.MaxReferenceDepth, r.opts.Limits.MaxComponents
	if maxDepth <= 0 {
		maxDepth = ocm.DefaultMaxReferenceDepth
	}
	if maxComponents <= 0 {
		maxComponents = ocm.DefaultMaxComponents
	}
	walked := map[string]bool{}
	var walk func(parent *Component, path []string) error
	walk = func(parent *Component, path []string) error {
		parent.references = map[string]string{}
		for _, ref := range parent.Descriptor.Component.References {
			where := fmt.Sprintf("component reference %q of %s", ref.Name, parent.Key())
			if parent.RepositoryContext == nil {
				return fmt.Errorf("%s: the component has no repository context to read %s:%s from", where, ref.ComponentName, ref.Version)
			}
			target := cv.overwrite(overwrites, versionRef{parent.RepositoryContext, ref.ComponentName, ref.Version})
			key := target.name + ":" + target.version
			for _, p := range path {
				if p == key {
					return fmt.Errorf("component references form a cycle: %s -> %s", strings.Join(path, " -> "), key)
				}
			}
			if len(path) >= maxDepth {
				return fmt.Errorf("component references of %s are nested deeper than %d (--ocm-max-reference-depth): %s -> %s", path[0], maxDepth, strings.Join(path, " -> "), key)
			}
			child, ok := cv.Components[key]
			if !ok {
				if len(cv.Components) >= maxComponents {
					return fmt.Errorf("component %s references more than %d component versions in all (--ocm-max-components)", path[0], maxComponents)
				}
				var err error
				if child, err = r.readVersion(ctx, cv, target, creds); err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				cv.Components[key] = child
			}
			parent.references[ref.Name] = key
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
	return walk(cv.Root, []string{cv.Root.Key()})
}
