package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// ComponentDescriptorDefinition says which component version (an OCM
// component descriptor) an installation's blueprint and resources come
// from: a reference into a repository, or a descriptor carried inline.
// +kubebuilder:validation:XValidation:rule="!(has(self.ref) && has(self.inline))",message="a component descriptor is given either by ref or inline, not both"
type ComponentDescriptorDefinition struct {
	// Reference names a component version in a repository.
	// +optional
	Reference *ComponentDescriptorReference `json:"ref,omitempty"`
	// Inline is a whole component descriptor (schema v2 or
	// ocm.software/v3alpha1); its references are read from its last
	// repositoryContext or the installation's Context.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Inline *AnyJSON `json:"inline,omitempty"`
}

// ComponentDescriptorReference names one component version.
type ComponentDescriptorReference struct {
	// RepositoryContext is the repository the component version is read
	// from; when empty, the installation's Context gives it.
	// +optional
	RepositoryContext *RepositoryContext `json:"repositoryContext,omitempty"`
	// ComponentName is the component's name, e.g. github.com/acme/app.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ComponentName string `json:"componentName"`
	// Version is the component version, e.g. v1.2.0.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version"`
}

// RepositoryContext is an OCM repository: a typed object. Terrace reads
// the OCI registry types (OCIRegistry, ociRegistry) through baseUrl and
// subPath; every other field is kept as written.
// +kubebuilder:pruning:PreserveUnknownFields
type RepositoryContext struct {
	// Type is the repository type, e.g. OCIRegistry.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Type string `json:"type"`
	// BaseURL is the registry host and repository prefix of an OCI
	// registry, e.g. ghcr.io/acme/components.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	BaseURL string `json:"baseUrl,omitempty"`
	// SubPath is appended to baseUrl.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	SubPath string `json:"subPath,omitempty"`
	// Extra holds the fields Terrace does not read, so that a context
	// survives a round trip unchanged.
	Extra map[string]AnyJSON `json:"-"`
}

// MarshalJSON writes the known fields and Extra as one object.
func (r RepositoryContext) MarshalJSON() ([]byte, error) {
	fields := make(map[string]any, len(r.Extra)+3)
	for k, v := range r.Extra {
		fields[k] = v
	}
	fields["type"] = r.Type
	if r.BaseURL != "" {
		fields["baseUrl"] = r.BaseURL
	}
	if r.SubPath != "" {
		fields["subPath"] = r.SubPath
	}
	return json.Marshal(fields)
}

// UnmarshalJSON reads an object; fields other than type, baseUrl and
// subPath go to Extra.
func (r *RepositoryContext) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("a repository context must be an object: %w", err)
	}
	out := RepositoryContext{}
	for _, known := range []struct {
		key string
		to  *string
	}{{"type", &out.Type}, {"baseUrl", &out.BaseURL}, {"subPath", &out.SubPath}} {
		raw, ok := fields[known.key]
		if !ok {
			continue
		}
		delete(fields, known.key)
		if bytes.Equal(raw, []byte("null")) {
			continue
		}
		if err := json.Unmarshal(raw, known.to); err != nil {
			return fmt.Errorf("repository context field %s must be a string: %w", known.key, err)
		}
	}
	if len(fields) > 0 {
		out.Extra = make(map[string]AnyJSON, len(fields))
		keys := make([]string, 0, len(fields))
		for k := range fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out.Extra[k] = NewAnyJSON(fields[k])
		}
	}
	*r = out
	return nil
}

// BlueprintReference names the component version's resource that holds an
// installation's blueprint.
type BlueprintReference struct {
	// ResourceName is the name of a resource of the installation's
	// component version whose content is the blueprint.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ResourceName string `json:"resourceName"`
}

// ComponentVersionOverwrite replaces the component versions that match
// Source by Substitution, for the installations whose Context names the
// ComponentVersionOverwrites object holding it.
type ComponentVersionOverwrite struct {
	// Source selects component versions: each field it sets must match,
	// an unset field matches any value.
	Source ComponentVersionOverwriteReference `json:"source"`
	// Substitution replaces the fields it sets; the others stay.
	Substitution ComponentVersionOverwriteReference `json:"substitution"`
}

// ComponentVersionOverwriteReference is a partial component version
// reference: each field is optional.
type ComponentVersionOverwriteReference struct {
	// RepositoryContext is the repository.
	// +optional
	RepositoryContext *RepositoryContext `json:"repositoryContext,omitempty"`
	// ComponentName is the component's name.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ComponentName string `json:"componentName,omitempty"`
	// Version is the component version.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version,omitempty"`
}
