// Package constructor turns an OCM component constructor file, or a
// component archive directory, into component descriptors and the local
// blobs to push with them.
package constructor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/terrace-dev/terrace/kit/ocm"
)

// Built is one component version ready to push.
type Built struct {
	Descriptor *ocm.ComponentDescriptor
	Blobs      []ocm.LocalBlob
}

// file is a constructor file: a list of components, or one component at the
// top level.
type file struct {
	Components []component `yaml:"components"`
	component  `yaml:",inline"`
}

type component struct {
	Name                string      `yaml:"name"`
	Version             string      `yaml:"version"`
	Provider            provider    `yaml:"provider"`
	Labels              []label     `yaml:"labels"`
	Resources           []artifact  `yaml:"resources"`
	Sources             []artifact  `yaml:"sources"`
	ComponentReferences []reference `yaml:"componentReferences"`
	References          []reference `yaml:"references"`
}

type provider struct {
	Name   string  `yaml:"name"`
	Labels []label `yaml:"labels"`
}

// UnmarshalYAML reads a provider as a name or as {name, labels}.
func (p *provider) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode {
		p.Name = node.Value
		return nil
	}
	type plain provider
	return node.Decode((*plain)(p))
}

type label struct {
	Name    string `yaml:"name"`
	Value   any    `yaml:"value"`
	Version string `yaml:"version"`
	Signing bool   `yaml:"signing"`
}

// artifact is a resource or a source: an input to build or an access.
type artifact struct {
	Name          string            `yaml:"name"`
	Version       string            `yaml:"version"`
	Type          string            `yaml:"type"`
	Relation      string            `yaml:"relation"`
	ExtraIdentity map[string]string `yaml:"extraIdentity"`
	Labels        []label           `yaml:"labels"`
	SourceRefs    []any             `yaml:"srcRefs"`
	Input         *input            `yaml:"input"`
	Access        map[string]any    `yaml:"access"`
	Digest        *ocm.DigestSpec   `yaml:"digest"`
}

type input struct {
	Type          string   `yaml:"type"`
	Path          string   `yaml:"path"`
	MediaType     string   `yaml:"mediaType"`
	Compress      bool     `yaml:"compress"`
	PreserveDir   bool     `yaml:"preserveDir"`
	IncludeFiles  []string `yaml:"includeFiles"`
	ExcludeFiles  []string `yaml:"excludeFiles"`
	FollowSymlink bool     `yaml:"followSymlinks"`
}

type reference struct {
	Name          string            `yaml:"name"`
	ComponentName string            `yaml:"componentName"`
	Version       string            `yaml:"version"`
	ExtraIdentity map[string]string `yaml:"extraIdentity"`
	Labels        []label           `yaml:"labels"`
}

// Load reads a constructor file and builds its components. Errors name the
// file, the line and the field.
func Load(path string) ([]Built, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(path, err)
	}
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	b := &builder{file: path, dir: filepath.Dir(path), root: &root}
	components, prefix := f.Components, []any{"components"}
	if len(components) == 0 {
		if f.Name == "" {
			return nil, fmt.Errorf("%s: no components: give a components: list (or name: and version: of one component)", path)
		}
		components, prefix = []component{f.component}, nil
	} else if f.Name != "" {
		return nil, b.errorf(nil, "name", "give either a components: list or one component at the top level, not both")
	}
	var out []Built
	for i := range components {
		at := prefix
		if prefix != nil {
			at = append(append([]any{}, prefix...), i)
		}
		built, err := b.component(&components[i], at)
		if err != nil {
			return nil, err
		}
		out = append(out, built)
	}
	return out, nil
}

// typeNames are the Go type names yaml.v3 puts in its messages.
var typeNames = regexp.MustCompile(` in type (\[\])?(constructor\.)?[a-zA-Z.\[\]]+`)

// yamlError writes each of yaml.v3's "line N: message" as
// "file:N: message", without Go type names.
func yamlError(path string, err error) error {
	var typeErr *yaml.TypeError
	if !errors.As(err, &typeErr) {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if rest, ok := strings.CutPrefix(msg, "line "); ok {
			return fmt.Errorf("%s:%s", path, rest)
		}
		return fmt.Errorf("%s: %s", path, msg)
	}
	lines := make([]string, 0, len(typeErr.Errors))
	for _, e := range typeErr.Errors {
		e = typeNames.ReplaceAllString(e, "")
		if rest, ok := strings.CutPrefix(e, "line "); ok {
			lines = append(lines, path+":"+rest)
			continue
		}
		lines = append(lines, path+": "+e)
	}
	return errors.New(strings.Join(lines, "\n"))
}

// builder builds components, reporting errors at their place in the file.
type builder struct {
	file string
	dir  string
	root *yaml.Node
}

// errorf is an error at path.field: "file:line: path.field: message".
func (b *builder) errorf(path []any, field, format string, args ...any) error {
	full := append(append([]any{}, path...), field)
	if field == "" {
		full = path
	}
	line := lineOf(b.root, full)
	where := b.file
	if line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	return fmt.Errorf("%s: %s: %s", where, pathString(full), fmt.Sprintf(format, args...))
}

func (b *builder) component(c *component, at []any) (Built, error) {
	if c.Name == "" {
		return Built{}, b.errorf(at, "name", "a component needs a name")
	}
	if c.Version == "" {
		return Built{}, b.errorf(at, "version", "component %s needs a version", c.Name)
	}
	if c.Provider.Name == "" {
		return Built{}, b.errorf(at, "provider", "component %s needs a provider (name)", c.Name)
	}
	cd := &ocm.ComponentDescriptor{Meta: ocm.Meta{SchemaVersion: ocm.SchemaVersionV2}, Component: ocm.Component{
		Name: c.Name, Version: c.Version,
		Provider:           ocm.Provider{Name: c.Provider.Name, Labels: labels(c.Provider.Labels)},
		Labels:             labels(c.Labels),
		RepositoryContexts: []ocm.RepositoryContext{},
		Resources:          []ocm.Resource{}, Sources: []ocm.Source{}, References: []ocm.ComponentReference{},
	}}
	var blobs []ocm.LocalBlob
	for i := range c.Resources {
		res, blob, err := b.resource(c, &c.Resources[i], append(append([]any{}, at...), "resources", i))
		if err != nil {
			return Built{}, err
		}
		cd.Component.Resources = append(cd.Component.Resources, res)
		blobs = appendBlob(blobs, blob)
	}
	for i := range c.Sources {
		src, blob, err := b.source(c, &c.Sources[i], append(append([]any{}, at...), "sources", i))
		if err != nil {
			return Built{}, err
		}
		cd.Component.Sources = append(cd.Component.Sources, src)
		blobs = appendBlob(blobs, blob)
	}
	refField := "componentReferences"
	refs := c.ComponentReferences
	if len(refs) == 0 {
		refField, refs = "references", c.References
	}
	for i, r := range refs {
		if r.Name == "" || r.ComponentName == "" || r.Version == "" {
			return Built{}, b.errorf(append(append([]any{}, at...), refField, i), "", "a component reference needs name, componentName and version")
		}
		cd.Component.References = append(cd.Component.References, ocm.ComponentReference{
			ElementMeta:   ocm.ElementMeta{Name: r.Name, Version: r.Version, ExtraIdentity: r.ExtraIdentity, Labels: labels(r.Labels)},
			ComponentName: r.ComponentName,
		})
	}
	if err := cd.Validate(); err != nil {
		return Built{}, b.errorf(at, "", "%v", err)
	}
	return Built{Descriptor: cd, Blobs: blobs}, nil
}

func appendBlob(blobs []ocm.LocalBlob, blob *ocm.LocalBlob) []ocm.LocalBlob {
	if blob == nil {
		return blobs
	}
	return append(blobs, *blob)
}

func labels(in []label) []ocm.Label {
	var out []ocm.Label
	for _, l := range in {
		value, _ := json.Marshal(l.Value)
		out = append(out, ocm.Label{Name: l.Name, Value: value, Version: l.Version, Signing: l.Signing})
	}
	return out
}

// lineOf finds the line of path (map keys and list indexes) in the YAML
// tree: the deepest part of it that exists.
func lineOf(node *yaml.Node, path []any) int {
	if node == nil {
		return 0
	}
	if node.Kind == yaml.DocumentNode && len(node.Content) > 0 {
		node = node.Content[0]
	}
	line := node.Line
	for _, p := range path {
		next := child(node, p)
		if next == nil {
			return line
		}
		node, line = next, next.Line
	}
	return line
}

func child(node *yaml.Node, p any) *yaml.Node {
	switch key := p.(type) {
	case string:
		if node.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			if node.Content[i].Value == key {
				if node.Content[i+1].Kind == yaml.ScalarNode {
					return node.Content[i]
				}
				return node.Content[i+1]
			}
		}
	case int:
		if node.Kind == yaml.SequenceNode && key < len(node.Content) {
			return node.Content[key]
		}
	}
	return nil
}

// pathString writes a path as components[0].resources[1].input.
func pathString(path []any) string {
	var sb strings.Builder
	for _, p := range path {
		switch v := p.(type) {
		case int:
			fmt.Fprintf(&sb, "[%d]", v)
		case string:
			if sb.Len() > 0 {
				sb.WriteString(".")
			}
			sb.WriteString(v)
		}
	}
	if sb.Len() == 0 {
		return "(top level)"
	}
	return sb.String()
}
