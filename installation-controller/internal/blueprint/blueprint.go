// Package blueprint parses inline blueprints in Landscaper's format: a
// filesystem (file name → content) holding blueprint.yaml, which declares
// imports, exports, deploy executions, sub-installations and export
// executions.
//
// Parsing is pure: no API access, so every rule is table-tested.
package blueprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// Import and export types.
const (
	TypeData       = "data"
	TypeTarget     = "target"
	TypeTargetList = "targetList"
	TypeTargetMap  = "targetMap"
)

// IsTargetType reports whether typ is one of the target types: its values
// come from spec.imports.targets.
func IsTargetType(typ string) bool {
	return typ == TypeTarget || typ == TypeTargetList || typ == TypeTargetMap
}

// ExecutorGoTemplate is the only executor type Terrace supports.
const ExecutorGoTemplate = "GoTemplate"

// Blueprint is a parsed blueprint.
type Blueprint struct {
	Imports                   []FieldDefinition
	Exports                   []FieldDefinition
	DeployExecutions          []Execution
	ExportExecutions          []Execution
	Subinstallations          []InstallationTemplate
	SubinstallationExecutions []Execution
	// ImportExecutions run after the imports are read and checked, before
	// every other execution: they add bindings to the imports or fail the
	// installation (import_executions.go).
	ImportExecutions []Execution
	// JSONSchemaVersion is the draft of the schemas that name none with
	// $schema; empty means draft 2020-12.
	JSONSchemaVersion string
	// Files is the blueprint's filesystem.
	Files map[string]string
	// LocalTypes are the JSON schemas the blueprint names for its
	// fields' schemas to refer to (`$ref: local://<name>`).
	LocalTypes map[string]any
}

// FieldDefinition declares one import or export.
type FieldDefinition struct {
	Name string
	// Type is TypeData or TypeTarget.
	Type string
	// Required is true unless the blueprint says `required: false`
	// (exports are never required).
	Required bool
	// Default is the value used when an optional import is missing.
	Default any
	// HasDefault says whether Default is set (nil is a valid default).
	HasDefault bool
	// Schema is the JSON schema of a data field, nil if none.
	Schema any
	// TargetType is the required type of a target field, empty if any.
	TargetType string
	// Condition is the optional import this one is nested under (a
	// conditional import): it is only required when that one is there.
	Condition string
}

// Execution is one executor: a GoTemplate either inline or in a file.
type Execution struct {
	Name string
	Type string
	// Template is the template source.
	Template string
	// File is the file the template comes from: blueprint.yaml for inline
	// templates, else the referenced file.
	File string
	// Line is the line in File where the template's first line is, so
	// template errors point at the line a user edits.
	Line int
}

// InstallationTemplate describes one sub-installation.
type InstallationTemplate struct {
	Name string `json:"name" yaml:"name"`
	// Blueprint of the sub-installation.
	Blueprint TemplateBlueprint `json:"blueprint" yaml:"blueprint"`
	// Imports, Exports and the data mappings have the Installation spec's shape.
	Imports            lsv1alpha1.InstallationImports `json:"imports,omitempty" yaml:"imports,omitempty"`
	ImportDataMappings map[string]any                 `json:"importDataMappings,omitempty" yaml:"importDataMappings,omitempty"`
	Exports            lsv1alpha1.InstallationExports `json:"exports,omitempty" yaml:"exports,omitempty"`
	ExportDataMappings map[string]any                 `json:"exportDataMappings,omitempty" yaml:"exportDataMappings,omitempty"`
}

// TemplateBlueprint is a sub-installation's blueprint: an inline filesystem,
// or a directory of the parent's filesystem.
type TemplateBlueprint struct {
	Filesystem map[string]string `json:"filesystem,omitempty" yaml:"filesystem,omitempty"`
	// Dir is a directory of the parent blueprint's filesystem holding the
	// sub-installation's blueprint.yaml (and its other files).
	Dir string `json:"dir,omitempty" yaml:"dir,omitempty"`
	// Ref is a blueprint resource of the parent's component version.
	Ref *TemplateBlueprintRef `json:"ref,omitempty" yaml:"ref,omitempty"`
}

// Error is a blueprint that cannot be used; the message says what to change.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

func errorf(file string, line int, format string, args ...any) error {
	return &Error{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// Parse reads blueprint.yaml from a filesystem.
func Parse(files map[string]string) (*Blueprint, error) {
	src, ok := files[lsv1alpha1.BlueprintFileName]
	if !ok {
		return nil, errorf(lsv1alpha1.BlueprintFileName, 0, "the blueprint filesystem has no %s (files: %s)", lsv1alpha1.BlueprintFileName, strings.Join(sortedKeys(files), ", "))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		return nil, errorf(lsv1alpha1.BlueprintFileName, 0, "not valid YAML: %v", err)
	}
	bp := &Blueprint{Files: files}
	if len(doc.Content) == 0 {
		return bp, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, errorf(lsv1alpha1.BlueprintFileName, root.Line, "must be a YAML mapping")
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i].Value, root.Content[i+1]
		var err error
		switch key {
		case "imports":
			bp.Imports, err = parseFields(val, true, "")
		case "exports":
			bp.Exports, err = parseFields(val, false, "")
		case "deployExecutions":
			bp.DeployExecutions, err = parseExecutions(val, files)
		case "exportExecutions":
			bp.ExportExecutions, err = parseExecutions(val, files)
		case "subinstallationExecutions":
			bp.SubinstallationExecutions, err = parseExecutions(val, files)
		case "importExecutions":
			bp.ImportExecutions, err = parseExecutions(val, files)
		case "subinstallations":
			bp.Subinstallations, err = parseSubinstallations(val, files)
		case "localTypes":
			bp.LocalTypes, err = parseLocalTypes(val)
		case "jsonSchemaVersion", "jsonSchema":
			bp.JSONSchemaVersion, err = parseSchemaVersion(val)
		case "apiVersion", "kind", "annotations":
		default:
			err = errorf(lsv1alpha1.BlueprintFileName, root.Content[i].Line, "unknown field %q", key)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := checkUnique(bp); err != nil {
		return nil, err
	}
	return bp, nil
}

func checkUnique(bp *Blueprint) error {
	for what, defs := range map[string][]FieldDefinition{"import": bp.Imports, "export": bp.Exports} {
		seen := map[string]bool{}
		for _, d := range defs {
			if seen[d.Name] {
				return errorf(lsv1alpha1.BlueprintFileName, 0, "%s %q is declared twice", what, d.Name)
			}
			seen[d.Name] = true
		}
	}
	return nil
}

func parseLocalTypes(n *yaml.Node) (map[string]any, error) {
	var raw map[string]any
	if err := n.Decode(&raw); err != nil {
		return nil, errorf(lsv1alpha1.BlueprintFileName, n.Line, "localTypes must map type names to JSON schemas: %v", err)
	}
	types, _ := normalize(raw).(map[string]any)
	return types, nil
}

type rawField struct {
	Name       string         `yaml:"name"`
	Type       string         `yaml:"type"`
	Required   *bool          `yaml:"required"`
	Default    *rawDefault    `yaml:"default"`
	Schema     any            `yaml:"schema"`
	TargetType string         `yaml:"targetType"`
	Extra      map[string]any `yaml:",inline"`
}

type rawDefault struct {
	Value any `yaml:"value"`
}

func parseFields(n *yaml.Node, imports bool, condition string) ([]FieldDefinition, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, errorf(lsv1alpha1.BlueprintFileName, n.Line, "imports and exports must be lists")
	}
	out := make([]FieldDefinition, 0, len(n.Content))
	for _, item := range n.Content {
		var rf rawField
		if err := item.Decode(&rf); err != nil {
			return nil, errorf(lsv1alpha1.BlueprintFileName, item.Line, "%v", err)
		}
		if rf.Name == "" {
			return nil, errorf(lsv1alpha1.BlueprintFileName, item.Line, "an import or export needs a name")
		}
		fd := FieldDefinition{Name: rf.Name, Type: rf.Type, Schema: rf.Schema, TargetType: rf.TargetType, Required: imports, Condition: condition}
		if fd.Type == "" {
			// Landscaper's older format has no type: a targetType marks a target.
			fd.Type = TypeData
			if rf.TargetType != "" {
				fd.Type = TypeTarget
			}
		}
		if fd.Type != TypeData && !IsTargetType(fd.Type) {
			return nil, errorf(lsv1alpha1.BlueprintFileName, item.Line, "%q has type %q: supported are %q, %q, %q and %q", rf.Name, rf.Type, TypeData, TypeTarget, TypeTargetList, TypeTargetMap)
		}
		if !imports && fd.Type != TypeData && fd.Type != TypeTarget {
			return nil, errorf(lsv1alpha1.BlueprintFileName, item.Line, "export %q has type %q: exports are %q or %q", rf.Name, rf.Type, TypeData, TypeTarget)
		}
		// Landscaper's short form of its own target types.
		fd.TargetType = lsv1alpha1.FullTargetType(fd.TargetType)
		if imports && rf.Required != nil {
			fd.Required = *rf.Required
		}
		if rf.Default != nil {
			fd.Default, fd.HasDefault = normalize(rf.Default.Value), true
		}
		fd.Schema = normalize(fd.Schema)
		out = append(out, fd)
		nested, err := parseConditionalImports(item, fd, imports)
		if err != nil {
			return nil, err
		}
		out = append(out, nested...)
	}
	return out, nil
}

type rawExecution struct {
	Name     string `yaml:"name"`
	Type     string `yaml:"type"`
	File     string `yaml:"file"`
	Template any    `yaml:"template"`
}

func parseExecutions(n *yaml.Node, files map[string]string) ([]Execution, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, errorf(lsv1alpha1.BlueprintFileName, n.Line, "executions must be a list")
	}
	out := make([]Execution, 0, len(n.Content))
	for i, item := range n.Content {
		var re rawExecution
		if err := item.Decode(&re); err != nil {
			return nil, errorf(lsv1alpha1.BlueprintFileName, item.Line, "%v", err)
		}
		ex := Execution{Name: re.Name, Type: re.Type}
		if ex.Name == "" {
			ex.Name = fmt.Sprintf("execution-%d", i)
		}
		if ex.Type != ExecutorGoTemplate {
			return nil, errorf(lsv1alpha1.BlueprintFileName, item.Line, "execution %q has type %q: only %q is supported", ex.Name, re.Type, ExecutorGoTemplate)
		}
		switch {
		case re.File != "":
			content, ok := files[cleanPath(re.File)]
			if !ok {
				return nil, errorf(lsv1alpha1.BlueprintFileName, item.Line, "execution %q references file %q, which is not in the blueprint filesystem", ex.Name, re.File)
			}
			ex.Template, ex.File, ex.Line = content, cleanPath(re.File), 1
		case re.Template != nil:
			tn := mappingValue(item, "template")
			s, ok := re.Template.(string)
			if !ok {
				return nil, errorf(lsv1alpha1.BlueprintFileName, tn.Line, "execution %q: template must be a string (use `template: |`)", ex.Name)
			}
			ex.Template, ex.File, ex.Line = s, lsv1alpha1.BlueprintFileName, tn.Line
			if tn.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
				// A block scalar's content starts on the line after its indicator.
				ex.Line++
			}
		default:
			return nil, errorf(lsv1alpha1.BlueprintFileName, item.Line, "execution %q needs a template or a file", ex.Name)
		}
		out = append(out, ex)
	}
	return out, nil
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return n
}

func parseSubinstallations(n *yaml.Node, files map[string]string) ([]InstallationTemplate, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, errorf(lsv1alpha1.BlueprintFileName, n.Line, "subinstallations must be a list")
	}
	out := make([]InstallationTemplate, 0, len(n.Content))
	for _, item := range n.Content {
		var raw map[string]any
		if err := item.Decode(&raw); err != nil {
			return nil, errorf(lsv1alpha1.BlueprintFileName, item.Line, "%v", err)
		}
		if f, ok := raw["file"].(string); ok && f != "" {
			content, ok := files[cleanPath(f)]
			if !ok {
				return nil, errorf(lsv1alpha1.BlueprintFileName, item.Line, "subinstallation file %q is not in the blueprint filesystem", f)
			}
			t, err := ParseInstallationTemplate(cleanPath(f), []byte(content))
			if err != nil {
				return nil, err
			}
			out = append(out, *t)
			continue
		}
		t, err := DecodeInstallationTemplate(raw)
		if err != nil {
			return nil, errorf(lsv1alpha1.BlueprintFileName, item.Line, "%v", err)
		}
		out = append(out, *t)
	}
	return out, nil
}

// ParseInstallationTemplate decodes one sub-installation template document.
func ParseInstallationTemplate(file string, data []byte) (*InstallationTemplate, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, errorf(file, 0, "not a valid installation template: %v", err)
	}
	t, err := DecodeInstallationTemplate(raw)
	if err != nil {
		return nil, errorf(file, 0, "%v", err)
	}
	return t, nil
}

// DecodeInstallationTemplate converts a decoded YAML/JSON value into a
// template. It goes through JSON so the API types' json tags apply, and
// refuses unknown fields so a typo is reported rather than ignored.
func DecodeInstallationTemplate(raw map[string]any) (*InstallationTemplate, error) {
	delete(raw, "apiVersion")
	delete(raw, "kind")
	data, err := json.Marshal(normalize(raw))
	if err != nil {
		return nil, fmt.Errorf("installation template: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t InstallationTemplate
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("installation template: %w", err)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// Filesystem returns the sub-installation's blueprint filesystem, resolving
// a directory reference against the parent's files.
func (t *InstallationTemplate) Filesystem(parent map[string]string) (map[string]string, error) {
	switch {
	case len(t.Blueprint.Filesystem) > 0 && t.Blueprint.Dir != "":
		return nil, fmt.Errorf("subinstallation %q: blueprint has both filesystem and dir", t.Name)
	case len(t.Blueprint.Filesystem) > 0:
		return t.Blueprint.Filesystem, nil
	case t.Blueprint.Dir != "":
		dir := cleanPath(t.Blueprint.Dir) + "/"
		fs := map[string]string{}
		for name, content := range parent {
			if rel, ok := strings.CutPrefix(name, dir); ok {
				fs[rel] = content
			}
		}
		if _, ok := fs[lsv1alpha1.BlueprintFileName]; !ok {
			return nil, fmt.Errorf("subinstallation %q: directory %q of the blueprint filesystem has no %s", t.Name, t.Blueprint.Dir, lsv1alpha1.BlueprintFileName)
		}
		return fs, nil
	default:
		return nil, fmt.Errorf("subinstallation %q: blueprint needs filesystem or dir", t.Name)
	}
}

// Validate checks the parts of a template the API server cannot check.
func (t *InstallationTemplate) Validate() error {
	if t.Name == "" {
		return errors.New("a subinstallation needs a name")
	}
	return nil
}

func cleanPath(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// normalize turns YAML-decoded values into JSON-shaped ones
// (map[string]any, []any, float64/int64, string, bool, nil).
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			out[k] = normalize(val)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			out[fmt.Sprint(k)] = normalize(val)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = normalize(val)
		}
		return out
	case int:
		return int64(t)
	default:
		return v
	}
}

// Import returns the import definition of name.
func (b *Blueprint) Import(name string) (FieldDefinition, bool) {
	for _, d := range b.Imports {
		if d.Name == name {
			return d, true
		}
	}
	return FieldDefinition{}, false
}
