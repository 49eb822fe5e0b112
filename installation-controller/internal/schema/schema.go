// Package schema validates values against the JSON schemas blueprints
// declare for their imports and exports
// (github.com/santhosh-tekuri/jsonschema/v6, drafts 4 to 2020-12).
//
// Blueprints are written by the users of a shared controller, so a schema is
// confined to its blueprint: references resolve only to the blueprint's own
// parts (loader.go), never to the controller's files or network; what a
// schema may expand to is bounded when it is compiled (bounds.go), and the
// work of one validation before it runs (steps.go). A blueprint's schemas are
// compiled once and kept in a bounded cache (cache.go).
package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/terrace-dev/terrace/kit/text"
)

// Document is what one blueprint's schemas are compiled from.
type Document struct {
	// Fields are the schemas to compile by field ("import x"); a nil
	// schema accepts anything.
	Fields map[string]any
	// LocalTypes are the blueprint's localTypes, which schemas refer to as
	// local://<name>.
	LocalTypes map[string]any
	// Files is the blueprint's filesystem, which schemas refer to as
	// blueprint://<path>.
	Files map[string]string
	// DefaultDraft is the URL of the draft of the schemas that name none
	// with $schema (the blueprint's jsonSchemaVersion); empty means
	// draft 2020-12.
	DefaultDraft string
}

// Set is a Document's compiled schemas. It is read-only and shared between
// reconciles (cache.go).
type Set struct {
	schemas map[string]*jsonschema.Schema
	// errs are the fields whose schema did not compile: Validate reports
	// them for that field alone.
	errs map[string]error
	// dynamic lists the schemas a $dynamicRef or $recursiveRef may land
	// on at run time, by anchor (bounds.go).
	dynamic map[string][]*jsonschema.Schema
	// unevaluated is set when a schema uses unevaluatedProperties or
	// unevaluatedItems, which make each application copy the keys of the
	// value (steps.go).
	unevaluated bool
}

// fieldURL is where a field's schema lives for the compiler; references
// relative to it name no part of the blueprint and are refused (loader.go).
func fieldURL(field string) string {
	return "field:///" + url.PathEscape(field)
}

// compile compiles every field of doc; what one field's schema does wrong is
// kept as that field's error. It returns the size of the files loaded too.
func compile(doc Document) (*Set, int64) {
	s := &Set{schemas: map[string]*jsonschema.Schema{}, errs: map[string]error{}}
	c := jsonschema.NewCompiler()
	// The library's default loader opens file:// URLs; this one reaches
	// nothing outside the blueprint.
	l := &loader{doc: doc}
	c.UseLoader(l)
	if d := draftOf(doc.DefaultDraft); d != nil {
		c.DefaultDraft(d)
	}
	fields := make([]string, 0, len(doc.Fields))
	for f, sch := range doc.Fields {
		if sch == nil {
			continue
		}
		fields = append(fields, f)
		v, err := roundTrip(sch)
		if err == nil {
			err = c.AddResource(fieldURL(f), v)
		}
		if err != nil {
			s.errs[f] = fmt.Errorf("%s: schema is not JSON: %w", f, err)
		}
	}
	sort.Strings(fields)
	for _, f := range fields {
		if s.errs[f] != nil {
			continue
		}
		sch, err := c.Compile(fieldURL(f))
		if err == nil {
			err = s.checkBounds(sch)
		}
		if err != nil {
			s.errs[f] = fmt.Errorf("%s: invalid schema: %w", f, compileError(err))
			continue
		}
		s.schemas[f] = sch
	}
	return s, l.fileBytes
}

// compileError prefers the loader's refusal, which says what to write
// instead, to the library's wrapping of it.
func compileError(err error) error {
	var le *jsonschema.LoadURLError
	if errors.As(err, &le) {
		err = le.Err
	}
	var re *RefError
	if errors.As(err, &re) {
		return re
	}
	return err
}

// Validate checks value against field's schema. A field without a schema
// accepts anything. The error names the field and says what is wrong, in at
// most maxMessage bytes. ctx ends the counting of the validation's steps
// (its deadline is the reconcile's).
func (s *Set) Validate(ctx context.Context, field string, value any) error {
	if err := s.errs[field]; err != nil {
		return err
	}
	sch, ok := s.schemas[field]
	if !ok {
		return nil
	}
	val, err := roundTrip(value)
	if err != nil {
		return fmt.Errorf("%s: value is not JSON: %w", field, err)
	}
	if err := s.countSteps(ctx, sch, val); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if err := sch.Validate(val); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("%s: value does not match its schema: %s", field, flatten(ve))
		}
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

// Validate checks value against schema (a JSON-shaped Go value) on its own,
// with nothing to refer to but itself. A nil schema accepts anything.
func Validate(field string, schema, value any) error {
	set, err := Compile(Document{Fields: map[string]any{field: schema}})
	if err != nil {
		return err
	}
	return set.Validate(context.Background(), field, value)
}

// maxCauses is how many of a validation's leaf causes its error lists.
const maxCauses = 10

// maxMessage bounds the message of a failed validation, which quotes values.
const maxMessage = 4096

// flatten lists the leaf causes, which say what is actually wrong, as
// "at <path>: <message>".
func flatten(ve *jsonschema.ValidationError) string {
	var parts []string
	total := 0
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			total++
			if len(parts) < maxCauses {
				loc := "/"
				if len(e.InstanceLocation) > 0 {
					loc = "/" + strings.Join(e.InstanceLocation, "/")
				}
				parts = append(parts, fmt.Sprintf("at %s: %s", loc, e.ErrorKind.LocalizedString(english)))
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	var b bytes.Buffer
	b.WriteString(strings.Join(parts, "; "))
	if total > len(parts) {
		fmt.Fprintf(&b, "; and %d more", total-len(parts))
	}
	return text.CutMiddle(b.String(), maxMessage, 200)
}

var english = message.NewPrinter(language.English)

func roundTrip(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(data))
}
