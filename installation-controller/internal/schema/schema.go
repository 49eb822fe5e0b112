// Package schema validates values against the JSON schemas blueprints
// declare for their imports and exports
// (github.com/santhosh-tekuri/jsonschema/v6, drafts 4 to 2020-12).
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Validate checks value against schema (a JSON-shaped Go value). A nil
// schema accepts anything. The error names the field and says what is wrong.
func Validate(field string, schema, value any) error {
	if schema == nil {
		return nil
	}
	// Round-trip both through JSON so Go types match what the library
	// expects (json.Number for numbers).
	sch, err := roundTrip(schema)
	if err != nil {
		return fmt.Errorf("%s: schema is not JSON: %w", field, err)
	}
	val, err := roundTrip(value)
	if err != nil {
		return fmt.Errorf("%s: value is not JSON: %w", field, err)
	}
	c := jsonschema.NewCompiler()
	const url = "blueprint://schema.json"
	if err := c.AddResource(url, sch); err != nil {
		return fmt.Errorf("%s: invalid schema: %w", field, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return fmt.Errorf("%s: invalid schema: %w", field, err)
	}
	if err := s.Validate(val); err != nil {
		var ve *jsonschema.ValidationError
		if asValidation(err, &ve) {
			return fmt.Errorf("%s: value does not match its schema: %s", field, flatten(ve))
		}
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

func asValidation(err error, target **jsonschema.ValidationError) bool {
	ve, ok := err.(*jsonschema.ValidationError) //nolint:errorlint // the library returns this type unwrapped
	if ok {
		*target = ve
	}
	return ok
}

// flatten lists the leaf causes, which say what is actually wrong, as
// "at <path>: <message>".
func flatten(ve *jsonschema.ValidationError) string {
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/"
			if len(e.InstanceLocation) > 0 {
				loc = ""
				for _, p := range e.InstanceLocation {
					loc += "/" + p
				}
			}
			parts = append(parts, fmt.Sprintf("at %s: %s", loc, e.ErrorKind.LocalizedString(english)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	var b bytes.Buffer
	for i, p := range parts {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p)
	}
	return b.String()
}

var english = message.NewPrinter(language.English)

func roundTrip(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(data))
}
