package ocm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// SchemaVersionV2 is meta.schemaVersion of a v2 component descriptor.
const SchemaVersionV2 = "v2"

// Relations of a resource to its component.
const (
	RelationLocal    = "local"
	RelationExternal = "external"
)

// ComponentDescriptor is one component version: the model every schema
// decodes into, shaped (and encoded) as schema v2.
type ComponentDescriptor struct {
	Meta       Meta              `json:"meta"`
	Component  Component         `json:"component"`
	Signatures []json.RawMessage `json:"signatures,omitempty"`
}

// Meta is the descriptor's schema metadata.
type Meta struct {
	SchemaVersion string `json:"schemaVersion"`
}

// Component is the content of a component version.
type Component struct {
	Name               string               `json:"name"`
	Version            string               `json:"version"`
	Provider           Provider             `json:"provider"`
	Labels             []Label              `json:"labels,omitempty"`
	CreationTime       string               `json:"creationTime,omitempty"`
	RepositoryContexts []RepositoryContext  `json:"repositoryContexts"`
	Resources          []Resource           `json:"resources"`
	Sources            []Source             `json:"sources"`
	References         []ComponentReference `json:"componentReferences"`
}

// Provider names who provides a component. Schema v2 writes it as a string
// (the name, or the JSON of name and labels when it has labels), v3alpha1 as
// an object; both are read.
type Provider struct {
	Name   string  `json:"name"`
	Labels []Label `json:"labels,omitempty"`
}

// MarshalJSON writes the v2 form: the name, or the JSON of the provider as a
// string when it has labels.
func (p Provider) MarshalJSON() ([]byte, error) {
	if len(p.Labels) == 0 {
		return json.Marshal(p.Name)
	}
	type plain Provider
	obj, err := json.Marshal(plain(p))
	if err != nil {
		return nil, err
	}
	return json.Marshal(string(obj))
}

// UnmarshalJSON reads a provider as a string (a name, or the JSON of an
// object) or as an object.
func (p *Provider) UnmarshalJSON(data []byte) error {
	type plain Provider
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		if strings.HasPrefix(strings.TrimSpace(s), "{") {
			var obj plain
			if err := json.Unmarshal([]byte(s), &obj); err == nil {
				*p = Provider(obj)
				return nil
			}
		}
		*p = Provider{Name: s}
		return nil
	}
	var obj plain
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("provider is neither a name nor an object with a name: %w", err)
	}
	*p = Provider(obj)
	return nil
}

// Label is a name and an arbitrary value attached to an element.
type Label struct {
	Name    string          `json:"name"`
	Value   json.RawMessage `json:"value"`
	Version string          `json:"version,omitempty"`
	Signing bool            `json:"signing,omitempty"`
}

// RepositoryContext is a repository a component version lived in; the last
// one of a descriptor is where it was read from.
type RepositoryContext struct {
	Type                 string `json:"type"`
	BaseURL              string `json:"baseUrl,omitempty"`
	SubPath              string `json:"subPath,omitempty"`
	ComponentNameMapping string `json:"componentNameMapping,omitempty"`
}

// DigestSpec is the digest of an element's content.
type DigestSpec struct {
	HashAlgorithm          string `json:"hashAlgorithm"`
	NormalisationAlgorithm string `json:"normalisationAlgorithm"`
	Value                  string `json:"value"`
}

// ElementMeta is what resources, sources and references share: the
// identity (name, extraIdentity; version where it disambiguates) and labels.
type ElementMeta struct {
	Name          string            `json:"name"`
	Version       string            `json:"version,omitempty"`
	ExtraIdentity map[string]string `json:"extraIdentity,omitempty"`
	Labels        []Label           `json:"labels,omitempty"`
}

// Resource is a delivery artifact of a component version.
type Resource struct {
	ElementMeta
	Type       string            `json:"type"`
	Relation   string            `json:"relation,omitempty"`
	SourceRefs []json.RawMessage `json:"srcRefs,omitempty"`
	Access     Access            `json:"access"`
	Digest     *DigestSpec       `json:"digest,omitempty"`
}

// Source is a source artifact of a component version.
type Source struct {
	ElementMeta
	Type   string `json:"type"`
	Access Access `json:"access"`
}

// ComponentReference is a reference to another component version.
type ComponentReference struct {
	ElementMeta   `json:",inline"`
	ComponentName string      `json:"componentName"`
	Digest        *DigestSpec `json:"digest,omitempty"`
}

// Resource returns the resource of the given name (and, when not empty,
// extra identity), or an error naming the component version.
func (cd *ComponentDescriptor) Resource(name string, extraIdentity map[string]string) (*Resource, error) {
	var found *Resource
	for i := range cd.Component.Resources {
		r := &cd.Component.Resources[i]
		if r.Name != name || !identityMatches(r.ExtraIdentity, extraIdentity) {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("component %s has more than one resource named %q: give its extraIdentity", cd.Key(), name)
		}
		found = r
	}
	if found == nil {
		return nil, &NotFoundError{What: fmt.Sprintf("resource %q of component %s", name, cd.Key())}
	}
	return found, nil
}

// Reference returns the component reference of the given name.
func (cd *ComponentDescriptor) Reference(name string) (*ComponentReference, error) {
	for i := range cd.Component.References {
		if cd.Component.References[i].Name == name {
			return &cd.Component.References[i], nil
		}
	}
	return nil, &NotFoundError{What: fmt.Sprintf("component reference %q of component %s", name, cd.Key())}
}

// Key is "<name>:<version>", the component version's identity.
func (cd *ComponentDescriptor) Key() string {
	return cd.Component.Name + ":" + cd.Component.Version
}

func identityMatches(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// NotFoundError is a component version, resource or reference that does
// not exist.
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string { return e.What + " not found" }
