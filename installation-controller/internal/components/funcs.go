package components

import (
	"encoding/json"
	"fmt"
	"sort"
	"text/template"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// Templating gives GoTemplate executions a component version: the
// template inputs and the functions that read it. Every value handed to a
// template is a fresh copy, so a template that changes one (sprig's set)
// changes nothing another template sees.
type Templating struct {
	cv *ComponentVersion
	// encoded holds each component's descriptor as JSON, by key.
	encoded map[string][]byte
}

// NewTemplating prepares the component version for templates.
func NewTemplating(cv *ComponentVersion) (*Templating, error) {
	t := &Templating{cv: cv, encoded: make(map[string][]byte, len(cv.Components))}
	for key, c := range cv.Components {
		data, err := json.Marshal(c.Descriptor)
		if err != nil {
			return nil, fmt.Errorf("component %s: %w", key, err)
		}
		t.encoded[key] = data
	}
	return t, nil
}

// Values are the template inputs: cd (the installation's component
// descriptor), components (every version its references reach, sorted by
// name and version) and componentDescriptorDef (spec.componentDescriptor).
func (t *Templating) Values(def lsv1alpha1.ComponentDescriptorDefinition) (map[string]any, error) {
	keys := make([]string, 0, len(t.encoded))
	for key := range t.encoded {
		if key != t.cv.Root.Key() {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	components := make([]any, 0, len(keys))
	for _, key := range keys {
		components = append(components, t.descriptor(key))
	}
	defMap, err := plain(def)
	if err != nil {
		return nil, fmt.Errorf("componentDescriptorDef: %w", err)
	}
	return map[string]any{
		"cd":                     t.descriptor(t.cv.Root.Key()),
		"components":             components,
		"componentDescriptorDef": defMap,
	}, nil
}

func (t *Templating) descriptor(key string) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(t.encoded[key], &m)
	return m
}

// plain is v as JSON-shaped maps and lists.
func plain(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// FuncMap are the component functions; they add to the executor's own.
func (t *Templating) FuncMap() template.FuncMap {
	return template.FuncMap{
		"getResource":          t.getResource,
		"getResources":         t.getResources,
		"getComponent":         t.getComponent,
		"getRepositoryContext": getRepositoryContext,
		"getResourceKey":       t.getResourceKey,
		"parseOCIRef":          parseOCIRef,
		"ociRefRepo":           ociRefRepo,
		"ociRefVersion":        ociRefVersion,
	}
}
