// Package tmpl runs GoTemplate executors: Go text/template with the sprig
// functions plus toYaml and fromYaml, whose output is a YAML document.
//
// Errors are the main concern here: a failing template names the execution,
// the blueprint file and the line in that file, and quotes the offending
// source (for template errors) or rendered output (for YAML errors), because
// users cannot otherwise locate a mistake in a rendered document they never
// see.
package tmpl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

// Source is a template and where it comes from.
type Source struct {
	// Execution is the executor's name in the blueprint.
	Execution string
	// File is the blueprint file holding the template.
	File string
	// Line is the line of File where the template starts (1 if unknown).
	Line int
	// Template is the template text.
	Template string
	// Collections are the bindings besides .imports whose entries a failed
	// render's error names when it read one they do not have.
	Collections []Collection
	// Files are the blueprint's files (path → content), which include,
	// readFile and readDir read (files.go); nil: the functions fail.
	Files map[string]string
}

// Error is a template that failed to parse, execute or produce YAML.
type Error struct {
	Execution string
	File      string
	// Line in File, 0 if unknown.
	Line int
	// Stage is "parse", "render" or "yaml".
	Stage string
	// Cause is the underlying error message.
	Cause string
	// Snippet quotes the lines around the error, the offending one marked ">".
	Snippet string
	// err is the underlying error, for errors.Is (ErrBusy,
	// ErrRenderDeadline).
	err error
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.err }

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "execution %q (%s", e.Execution, e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ", line %d", e.Line)
	}
	fmt.Fprintf(&b, "): %s failed: %s", e.Stage, e.Cause)
	if e.Snippet != "" {
		b.WriteString("\n")
		b.WriteString(e.Snippet)
	}
	return b.String()
}

// funcs returns the functions templates can call: sprig's, without those
// reading the host environment and with size limits on those that can
// allocate without bound (see limits.go), plus toYaml and fromYaml, all
// charging their results to b (budget.go).
func funcs(b *budget) template.FuncMap {
	f := sprig.TxtFuncMap()
	for name := range unavailable {
		delete(f, name)
	}
	bound(f)
	boundRegex(f)
	boundValues(f)
	boundLists(f, b)
	boundMethods(f)
	f["toYaml"] = toYAML
	f["fromYaml"] = fromYAML
	guardAll(f, b)
	return f
}

func toYAML(v any) (string, error) {
	out, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

func fromYAML(s string) (any, error) {
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return nil, err
	}
	return v, nil
}

// funcSet is a FuncMap and the budget its functions charge. Wrapping every
// function (guard) costs more than a small render, so sets are reused: a
// render takes one from the pool, resets its budget, and gives it back.
// hidden holds the functions the renderer inserts (steps.go), added to a
// template only after it is parsed.
type funcSet struct {
	funcs  template.FuncMap
	hidden template.FuncMap
	budget *budget
}

var funcSets = sync.Pool{New: func() any {
	b := &budget{}
	return &funcSet{funcs: funcs(b), hidden: hidden(b), budget: b}
}}

// templateLine finds "<name>:<line>" in a text/template error.
var templateLine = regexp.MustCompile(`template: [^:]*:(\d+)(?::\d+)?:`)

// yamlLine finds "line N" in a YAML error.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// Execute renders src with values and decodes the result as a YAML mapping.
func Execute(src Source, values map[string]any) (map[string]any, error) {
	return ExecuteContext(context.Background(), src, values)
}

// ExecuteContext is Execute within ctx, whose deadline is the reconcile's:
// the render stops there (ErrRenderDeadline) if Timeout does not stop it
// first. The render reserves what it uses from the process-wide budget
// (SetProcessBudget), waiting until its deadline to start if other renders
// hold all of it, and failing (ErrBusy) if it cannot reserve more later.
func ExecuteContext(ctx context.Context, src Source, values map[string]any) (map[string]any, error) {
	base := src.Line
	if base < 1 {
		base = 1
	}
	fail := func(stage string, err error, text string, line int, offset int) *Error {
		e := &Error{Execution: src.Execution, File: src.File, Stage: stage, Cause: cleanCause(err), err: err}
		if line > 0 {
			e.Line = line + offset
			e.Snippet = snippet(text, line, offset)
		}
		return e
	}
	values, extra := inputsFrom(ctx, values)
	fs := funcSets.Get().(*funcSet)
	defer funcSets.Put(fs)
	var set *template.Template
	t, err := template.New(src.Execution).Funcs(fs.funcs).Funcs(guarded(fileFuncs(src.Files, &set), fs.budget)).
		Funcs(guarded(extra, fs.budget)).Option("missingkey=zero").Parse(src.Template)
	if err == nil {
		set = t
		err = parseIncludes(t, src.Files)
	}
	if err != nil {
		e := fail("parse", err, src.Template, lineOf(templateLine, err), base-1)
		e.Cause = unavailableCause(e.Cause)
		return nil, e
	}
	// The step counter and the output check go in after parsing, so the
	// template cannot name them (steps.go).
	t.Funcs(fs.hidden)
	if err := instrument(t); err != nil {
		return nil, fail("render", err, src.Template, lineOf(templateLine, err), base-1)
	}
	var buf bytes.Buffer
	w := &limitedWriter{w: &buf, left: MaxOutputBytes}
	fs.budget.reset(ctx, w)
	if err := fs.budget.start(); err != nil {
		return nil, fail("render", err, "", 0, 0)
	}
	defer fs.budget.finish()
	if err := t.Execute(w, values); err != nil {
		e := fail("render", err, src.Template, lineOf(templateLine, err), base-1)
		e.Cause += bindingHint(err, values, src.Collections)
		return nil, e
	}
	// Decoding the document allocates far more than its text, like
	// fromYaml (yaml.go): 4 MB of `0,` took 680 MB. The render's results
	// are garbage by now, so the decode has a budget of its own.
	fs.budget.limit, fs.budget.left = MaxDocumentDecodeBytes, MaxDocumentDecodeBytes
	out := map[string]any{}
	const decoding = "decoding the rendered document"
	cost, what, err := fs.budget.fromYamlCost(decoding, buf.String())
	switch {
	case err != nil:
	case cost > fs.budget.left:
		err = fmt.Errorf("decoding the rendered document would allocate about %d bytes (%s), more than the limit of %d", cost, what, MaxDocumentDecodeBytes)
	default:
		fs.budget.left -= cost
		if err = fs.budget.backed(decoding); err == nil {
			err = yaml.Unmarshal(buf.Bytes(), &out)
		}
	}
	if err != nil {
		// A YAML error is in the rendered text, which is what we quote; the
		// line reported is that of the rendered document, not of the file.
		e := fail("yaml", err, buf.String(), lineOf(yamlLine, err), 0)
		if e.Line > 0 {
			e.Cause = fmt.Sprintf("%s (rendered output, line %d)", e.Cause, e.Line)
			e.Line = 0
		}
		return nil, e
	}
	return out, nil
}

func lineOf(re *regexp.Regexp, err error) int {
	m := re.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, convErr := strconv.Atoi(m[1])
	if convErr != nil {
		return 0
	}
	return n
}

// cleanCause drops the "template: name:line:col: " prefix the location
// already says.
func cleanCause(err error) string {
	msg := err.Error()
	var te template.ExecError
	if errors.As(err, &te) {
		msg = te.Err.Error()
	}
	if loc := templateLine.FindStringIndex(msg); loc != nil && loc[0] == 0 {
		msg = strings.TrimSpace(msg[loc[1]:])
	}
	// The inserted calls (steps.go) are not the template's: their errors
	// say what limit was hit, without naming them.
	return hiddenCall.ReplaceAllString(msg, ": ")
}

// hiddenCall is text/template's "at <fn>: error calling fn: " of the
// inserted functions ("at <fn n m>" for those with arguments).
var hiddenCall = regexp.MustCompile(` at <(?:` + hiddenNames + `)(?: \d+)*>: error calling (?:` + hiddenNames + `): `)

const hiddenNames = stepFunc + `|` + tickFunc + `|` + rangeFunc + `|` + outputFunc + `|` + enterFunc + `|` + leaveFunc

// snippet quotes up to two lines either side of line (1-based in text),
// numbering them as lines of the file (offset added).
func snippet(text string, line, offset int) string {
	lines := strings.Split(text, "\n")
	if line < 1 || line > len(lines) {
		return ""
	}
	var b strings.Builder
	for i := max(1, line-2); i <= min(len(lines), line+2); i++ {
		mark := " "
		if i == line {
			mark = ">"
		}
		fmt.Fprintf(&b, "%s %4d | %s\n", mark, i+offset, lines[i-1])
	}
	return strings.TrimSuffix(b.String(), "\n")
}
