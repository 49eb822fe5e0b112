package schema

import (
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Bounds on what a blueprint's schema may ask of the controller. A schema is
// a graph: references share subschemas, so a few lines can describe a tree
// of exponential size (each of thirty definitions an allOf of the one before,
// twice: 2^30 subschemas, which validation walks whole for every value), and
// a chain of references nests as deeply as it is long.
const (
	// MaxExpandedSchemas is how many subschemas one field's schema may
	// hold with every reference expanded once (a reference back to a
	// schema it is inside of, which only recurses into the value, counts
	// once).
	MaxExpandedSchemas = 100_000
	// MaxSchemaDepth is how deeply subschemas may nest with references
	// expanded: validation recurses once per level.
	MaxSchemaDepth = 500
)

// subschemas calls fn with every subschema s applies, to the value itself or
// to its parts, and with every schema a $recursiveRef or $dynamicRef of s may
// land on at run time (dynamic), until fn returns false.
func subschemas(s *jsonschema.Schema, dynamic map[string][]*jsonschema.Schema, fn func(*jsonschema.Schema) bool) bool {
	return inPlace(s, dynamic, fn) && inParts(s, fn)
}

// inPlace are the subschemas s applies to the value itself.
func inPlace(s *jsonschema.Schema, dynamic map[string][]*jsonschema.Schema, fn func(*jsonschema.Schema) bool) bool {
	each := func(l ...*jsonschema.Schema) bool {
		for _, c := range l {
			if c != nil && !fn(c) {
				return false
			}
		}
		return true
	}
	ok := each(s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else) && each(s.AllOf...) && each(s.AnyOf...) && each(s.OneOf...)
	if ok && s.RecursiveRef != nil {
		ok = each(dynamic[recursiveKey]...)
	}
	if ok && s.DynamicRef != nil {
		ok = each(s.DynamicRef.Ref) && each(dynamic[s.DynamicRef.Anchor]...)
	}
	for _, c := range s.DependentSchemas {
		ok = ok && fn(c)
	}
	for _, d := range s.Dependencies {
		if c, isSchema := d.(*jsonschema.Schema); isSchema && ok {
			ok = fn(c)
		}
	}
	return ok
}

// inParts are the subschemas s applies to the value's properties or items.
func inParts(s *jsonschema.Schema, fn func(*jsonschema.Schema) bool) bool {
	l := []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems}
	for _, c := range s.Properties {
		l = append(l, c)
	}
	for _, c := range s.PatternProperties {
		l = append(l, c)
	}
	for _, v := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			l = append(l, v)
		case []*jsonschema.Schema:
			l = append(l, v...)
		}
	}
	l = append(l, s.PrefixItems...)
	for _, c := range l {
		if c != nil && !fn(c) {
			return false
		}
	}
	return true
}

// recursiveKey indexes, in Set.dynamic, the schemas with
// "$recursiveAnchor": true (a $dynamicAnchor is never empty).
const recursiveKey = ""

// indexDynamic records the schemas reachable from root that a $dynamicRef
// or $recursiveRef may resolve to at run time, whichever scope it is in.
func (set *Set) indexDynamic(root *jsonschema.Schema) {
	if set.dynamic == nil {
		set.dynamic = map[string][]*jsonschema.Schema{}
	}
	seen := map[*jsonschema.Schema]bool{}
	stack := []*jsonschema.Schema{root}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[s] {
			continue
		}
		seen[s] = true
		if s.DynamicAnchor != "" {
			set.dynamic[s.DynamicAnchor] = append(set.dynamic[s.DynamicAnchor], s)
		}
		if s.RecursiveAnchor {
			set.dynamic[recursiveKey] = append(set.dynamic[recursiveKey], s)
		}
		if s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil {
			set.unevaluated = true
		}
		subschemas(s, nil, func(c *jsonschema.Schema) bool {
			stack = append(stack, c)
			return true
		})
	}
}

// expansion measures a schema graph with references expanded: each
// schema's size and height are computed once (memo), so that the walk takes
// time in proportion to the graph, not to the tree it describes.
type expansion struct {
	dynamic map[string][]*jsonschema.Schema
	onPath  map[*jsonschema.Schema]bool
	size    map[*jsonschema.Schema]int64
	height  map[*jsonschema.Schema]int
}

func errExpanded() error {
	return fmt.Errorf("the schema expands to more than %d subschemas once its references are expanded (MaxExpandedSchemas); "+
		"a reference used several times counts each time", MaxExpandedSchemas)
}

func errDepth() error {
	return fmt.Errorf("the schema nests subschemas more than %d levels deep once its references are expanded (MaxSchemaDepth)", MaxSchemaDepth)
}

// checkBounds indexes root's dynamic anchors and refuses a root beyond
// MaxExpandedSchemas or MaxSchemaDepth.
func (set *Set) checkBounds(root *jsonschema.Schema) error {
	set.indexDynamic(root)
	e := &expansion{
		dynamic: set.dynamic,
		onPath:  map[*jsonschema.Schema]bool{},
		size:    map[*jsonschema.Schema]int64{},
		height:  map[*jsonschema.Schema]int{},
	}
	_, _, err := e.walk(root, 1)
	return err
}

// walk returns the size and height of s reached at depth.
func (e *expansion) walk(s *jsonschema.Schema, depth int) (int64, int, error) {
	if depth > MaxSchemaDepth {
		return 0, 0, errDepth()
	}
	if e.onPath[s] {
		// Recursion: it repeats only as deep as the value nests, which
		// countSteps bounds for each value.
		return 1, 1, nil
	}
	if n, ok := e.size[s]; ok {
		if depth-1+e.height[s] > MaxSchemaDepth {
			return 0, 0, errDepth()
		}
		return n, e.height[s], nil
	}
	e.onPath[s] = true
	defer delete(e.onPath, s)
	size, height := int64(1), 1
	var err error
	subschemas(s, e.dynamic, func(c *jsonschema.Schema) bool {
		n, h, cerr := e.walk(c, depth+1)
		if cerr != nil {
			err = cerr
			return false
		}
		size += n
		height = max(height, h+1)
		if size > MaxExpandedSchemas {
			err = errExpanded()
			return false
		}
		return true
	})
	if err != nil {
		return 0, 0, err
	}
	e.size[s], e.height[s] = size, height
	return size, height, nil
}
