package schema

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxValidationSteps is how many times one validation may apply a subschema
// to a part of the value. A recursive schema applies itself once per level
// of the value, and one that applies itself twice per level (an allOf of two
// references to itself, each inside "properties") doubles the work with
// every level: thirty levels of a small value would take 2^30 steps. The
// steps are counted before validating (countSteps), from the compiled schema
// and the value, and a validation that would take more is refused.
const MaxValidationSteps = 1_000_000

// ctxEvery is how many steps countSteps counts between two looks at ctx.
const ctxEvery = 4096

func errSteps() error {
	return fmt.Errorf("validating the value would take more than %d steps (subschemas applied to its parts; MaxValidationSteps): "+
		"the schema applies some subschemas many times to each part", MaxValidationSteps)
}

// errRenderDeadline says that the reconcile ran out of time.
func errRenderDeadline(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the reconcile's render deadline was exceeded while validating: %w", ctx.Err())
	}
	return fmt.Errorf("the reconcile was cancelled while validating: %w", ctx.Err())
}

// counter counts the steps of one validation, as the library takes them or
// more: every subschema a schema applies counts, whether or not the library
// would stop early (anyOf at the first match, if at one of then and else),
// and additionalProperties counts for every property.
type counter struct {
	ctx   context.Context
	set   *Set
	left  int64
	steps int64
	// here are the schemas applied to the current part of the value
	// (in place), in which the library finds reference cycles.
	here []*jsonschema.Schema
}

// countSteps refuses a validation of v by root that would take more than
// MaxValidationSteps.
func (set *Set) countSteps(ctx context.Context, root *jsonschema.Schema, v any) error {
	c := &counter{ctx: ctx, set: set, left: MaxValidationSteps}
	return c.apply(root, v)
}

func (c *counter) step(n int64) error {
	c.left -= n
	if c.left < 0 {
		return errSteps()
	}
	c.steps += n
	if c.steps >= ctxEvery {
		c.steps = 0
		if c.ctx.Err() != nil {
			return errRenderDeadline(c.ctx)
		}
	}
	return nil
}

// apply counts s applied to v.
func (c *counter) apply(s *jsonschema.Schema, v any) error {
	if slices.Contains(c.here, s) {
		// The library reports the cycle instead of following it.
		return nil
	}
	cost := int64(1)
	if c.set.unevaluated {
		// Each application copies the keys it may have to track.
		switch v := v.(type) {
		case map[string]any:
			cost += int64(len(v))
		case []any:
			cost += int64(len(v))
		}
	}
	if err := c.step(cost); err != nil {
		return err
	}
	c.here = append(c.here, s)
	var err error
	inPlace(s, c.set.dynamic, func(sub *jsonschema.Schema) bool {
		err = c.apply(sub, v)
		return err == nil
	})
	c.here = c.here[:len(c.here)-1]
	if err != nil {
		return err
	}
	return c.parts(s, v)
}

// parts counts the subschemas s applies to v's properties or items, each
// in a scope of its own.
func (c *counter) parts(s *jsonschema.Schema, v any) error {
	outer := c.here
	c.here = nil
	defer func() { c.here = outer }()
	var err error
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			err = c.property(s, k, val)
			if err != nil {
				return err
			}
		}
	case []any:
		for i, item := range v {
			err = c.item(s, i, item)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *counter) property(s *jsonschema.Schema, k string, val any) error {
	if p := s.Properties[k]; p != nil {
		if err := c.apply(p, val); err != nil {
			return err
		}
	}
	for re, p := range s.PatternProperties {
		if err := c.step(1); err != nil {
			return err
		}
		if re.MatchString(k) {
			if err := c.apply(p, val); err != nil {
				return err
			}
		}
	}
	if ap, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		if err := c.apply(ap, val); err != nil {
			return err
		}
	}
	if s.PropertyNames != nil {
		if err := c.apply(s.PropertyNames, k); err != nil {
			return err
		}
	}
	if s.UnevaluatedProperties != nil {
		return c.apply(s.UnevaluatedProperties, val)
	}
	return nil
}

func (c *counter) item(s *jsonschema.Schema, i int, item any) error {
	l := []*jsonschema.Schema{s.Contains, s.Items2020, s.UnevaluatedItems}
	if i < len(s.PrefixItems) {
		l = append(l, s.PrefixItems[i])
	}
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		l = append(l, items)
	case []*jsonschema.Schema:
		if i < len(items) {
			l = append(l, items[i])
		}
	}
	if ai, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
		l = append(l, ai)
	}
	for _, sub := range l {
		if sub == nil {
			continue
		}
		if err := c.apply(sub, item); err != nil {
			return err
		}
	}
	return nil
}
