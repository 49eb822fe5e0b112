package tmpl

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
)

// Collection is a binding that maps names to values, such as .imports or an
// export execution's .deployitems. A misspelled name is zero (the template's
// missingkey=zero), and the failure text/template reports is about the next
// step ("nil pointer evaluating interface {}.host"), which does not name the
// cause: the render's error then says which names the collection has.
type Collection struct {
	// Path is the binding's path in the values, e.g. "deployitems" or
	// "values.deployitems".
	Path string
	// Noun names one entry ("deploy item") and Owner what has the entries
	// ("the execution").
	Noun, Owner string
	// Names are all the entries there are, also those without a value
	// (a deploy item that exported nothing); nil: the binding's keys.
	Names []string
	// NoValue says why an entry of Names has no value ("exported nothing").
	NoValue string
}

// importsCollection is the collection every render has.
var importsCollection = Collection{Path: "imports", Noun: "import", Owner: "the blueprint"}

// failedPipeline is the pipeline text/template names when an action fails
// ("at <.imports.x.y>" or "at <index .deployitems "x" "y">").
var failedPipeline = regexp.MustCompile(`at <([^>]*)>`)

// bindingHint says, for a render that failed inside a pipeline reading
// an entry of one of the collections that the collection does not have,
// which entries it has.
func bindingHint(err error, values map[string]any, collections []Collection) string {
	var te template.ExecError
	if !errors.As(err, &te) {
		return ""
	}
	m := failedPipeline.FindStringSubmatch(te.Err.Error())
	if m == nil {
		return ""
	}
	segments := pipelinePath(m[1])
	for _, c := range append([]Collection{importsCollection}, collections...) {
		if hint, ok := c.hint(segments, values); ok {
			return hint
		}
	}
	return ""
}

func (c Collection) hint(segments []string, values map[string]any) (string, bool) {
	path := strings.Split(c.Path, ".")
	if len(segments) <= len(path) || !slices.Equal(segments[:len(path)], path) {
		return "", false
	}
	var entries map[string]any
	var cur any = values
	for _, p := range path {
		m, _ := cur.(map[string]any)
		cur = m[p]
	}
	entries, _ = cur.(map[string]any)
	name := segments[len(path)]
	if _, ok := entries[name]; ok {
		return "", false
	}
	names := c.Names
	if names == nil {
		names = slices.Collect(maps.Keys(entries))
	} else if slices.Contains(names, name) {
		return fmt.Sprintf("; %s %q %s", c.Noun, name, c.NoValue), true
	}
	names = slices.Sorted(slices.Values(names))
	if len(names) == 0 {
		return fmt.Sprintf("; %s has no %s %q (it has none)", c.Owner, c.Noun, name), true
	}
	return fmt.Sprintf("; %s has no %s %q (its %ss: %s)", c.Owner, c.Noun, name, c.Noun, strings.Join(names, ", ")), true
}

// pipelinePath turns a failed pipeline into the path it reads:
// ".a.b.c" and `index .a "b" "c"` both into [a b c].
func pipelinePath(pipeline string) []string {
	fields := strings.Fields(pipeline)
	if len(fields) == 0 {
		return nil
	}
	if fields[0] != "index" {
		return strings.Split(strings.TrimPrefix(fields[0], "."), ".")
	}
	if len(fields) < 2 || !strings.HasPrefix(fields[1], ".") {
		return nil
	}
	path := strings.Split(strings.TrimPrefix(fields[1], "."), ".")
	for _, f := range fields[2:] {
		s, err := strconv.Unquote(f)
		if err != nil {
			break
		}
		path = append(path, s)
	}
	return path
}
