package ocm

import (
	"encoding/json"
	"fmt"
	"regexp"

	"sigs.k8s.io/yaml"
)

// The apiVersions of the Kubernetes-style descriptor schema; kind is
// ComponentVersion.
const (
	APIVersionV3Alpha1       = "ocm.software/v3alpha1"
	apiVersionV3Gardener     = "ocm.gardener.cloud/v3"
	kindComponentVersion     = "ComponentVersion"
	descriptorFileName       = "component-descriptor.yaml"
	maxComponentNameLength   = 255
	componentNamePatternText = `^[a-z][-a-z0-9]*([.][a-z][-a-z0-9]*)*[.][a-z]{2,}(/[a-z][-a-z0-9_]*([.][a-z][-a-z0-9_]*)*)+$`
	relaxedSemverPatternText = `^[v]?(0|[1-9]\d*)(?:\.(0|[1-9]\d*))?(?:\.(0|[1-9]\d*))?` +
		`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
		`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`
)

var (
	componentNamePattern = regexp.MustCompile(componentNamePatternText)
	relaxedSemverPattern = regexp.MustCompile(relaxedSemverPatternText)
)

// v3Descriptor is the ocm.software/v3alpha1 form of a descriptor.
type v3Descriptor struct {
	APIVersion         string              `json:"apiVersion"`
	Kind               string              `json:"kind"`
	Metadata           v3Metadata          `json:"metadata"`
	RepositoryContexts []RepositoryContext `json:"repositoryContexts,omitempty"`
	Spec               v3Spec              `json:"spec"`
	Signatures         []json.RawMessage   `json:"signatures,omitempty"`
}

type v3Metadata struct {
	Name         string   `json:"name"`
	Version      string   `json:"version"`
	Provider     Provider `json:"provider"`
	Labels       []Label  `json:"labels,omitempty"`
	CreationTime string   `json:"creationTime,omitempty"`
}

type v3Spec struct {
	Resources  []Resource           `json:"resources,omitempty"`
	Sources    []Source             `json:"sources,omitempty"`
	References []ComponentReference `json:"references,omitempty"`
}

// schemaProbe tells the schemas apart.
type schemaProbe struct {
	Meta       *Meta  `json:"meta"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// Decode reads a component descriptor in YAML or JSON, schema v2 or
// ocm.software/v3alpha1, and validates it.
func Decode(data []byte) (*ComponentDescriptor, error) {
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("component descriptor is not YAML or JSON: %w", err)
	}
	var probe schemaProbe
	if err := json.Unmarshal(jsonData, &probe); err != nil {
		return nil, fmt.Errorf("component descriptor is not an object: %w", err)
	}
	var cd *ComponentDescriptor
	switch {
	case probe.Meta != nil:
		if probe.Meta.SchemaVersion != SchemaVersionV2 {
			return nil, fmt.Errorf("component descriptor has meta.schemaVersion %q: only %q is supported", probe.Meta.SchemaVersion, SchemaVersionV2)
		}
		cd = &ComponentDescriptor{}
		if err := json.Unmarshal(jsonData, cd); err != nil {
			return nil, fmt.Errorf("component descriptor (schema v2): %w", err)
		}
	case probe.APIVersion == APIVersionV3Alpha1 || probe.APIVersion == apiVersionV3Gardener:
		if probe.Kind != kindComponentVersion {
			return nil, fmt.Errorf("component descriptor of apiVersion %s has kind %q, not %s", probe.APIVersion, probe.Kind, kindComponentVersion)
		}
		var v3 v3Descriptor
		if err := json.Unmarshal(jsonData, &v3); err != nil {
			return nil, fmt.Errorf("component descriptor (%s): %w", probe.APIVersion, err)
		}
		cd = fromV3(&v3)
	case probe.APIVersion != "":
		return nil, fmt.Errorf("component descriptor has apiVersion %q: only %s and meta.schemaVersion %s are supported", probe.APIVersion, APIVersionV3Alpha1, SchemaVersionV2)
	default:
		return nil, fmt.Errorf("component descriptor has neither meta.schemaVersion nor apiVersion")
	}
	cd.normalize()
	if err := cd.Validate(); err != nil {
		return nil, err
	}
	return cd, nil
}

func fromV3(v3 *v3Descriptor) *ComponentDescriptor {
	return &ComponentDescriptor{
		Meta: Meta{SchemaVersion: SchemaVersionV2},
		Component: Component{
			Name:               v3.Metadata.Name,
			Version:            v3.Metadata.Version,
			Provider:           v3.Metadata.Provider,
			Labels:             v3.Metadata.Labels,
			CreationTime:       v3.Metadata.CreationTime,
			RepositoryContexts: v3.RepositoryContexts,
			Resources:          v3.Spec.Resources,
			Sources:            v3.Spec.Sources,
			References:         v3.Spec.References,
		},
		Signatures: v3.Signatures,
	}
}

// normalize turns absent lists into empty ones: v2 writes them as [].
func (cd *ComponentDescriptor) normalize() {
	c := &cd.Component
	if c.RepositoryContexts == nil {
		c.RepositoryContexts = []RepositoryContext{}
	}
	if c.Resources == nil {
		c.Resources = []Resource{}
	}
	if c.Sources == nil {
		c.Sources = []Source{}
	}
	if c.References == nil {
		c.References = []ComponentReference{}
	}
}

// EncodeV2 writes cd as a schema v2 descriptor in YAML.
func EncodeV2(cd *ComponentDescriptor) ([]byte, error) {
	out := *cd
	out.Meta.SchemaVersion = SchemaVersionV2
	out.normalize()
	return yaml.Marshal(&out)
}

// EncodeV2JSON writes cd as a schema v2 descriptor in JSON.
func EncodeV2JSON(cd *ComponentDescriptor) ([]byte, error) {
	out := *cd
	out.Meta.SchemaVersion = SchemaVersionV2
	out.normalize()
	return json.Marshal(&out)
}

// Validate checks what Terrace relies on: the component's name and version
// in the schema's formats, named elements with types, unique identities,
// accesses with a type, references with a component name and version.
func (cd *ComponentDescriptor) Validate() error {
	c := &cd.Component
	if c.Name == "" {
		return fmt.Errorf("component descriptor: component.name is empty")
	}
	if len(c.Name) > maxComponentNameLength || !componentNamePattern.MatchString(c.Name) {
		return fmt.Errorf("component descriptor: component.name %q is not a component name (a lower-case DNS domain and a path, e.g. github.com/acme.org/app)", c.Name)
	}
	if !relaxedSemverPattern.MatchString(c.Version) {
		return fmt.Errorf("component descriptor %s: component.version %q is not a semantic version", c.Name, c.Version)
	}
	seen := map[string]bool{}
	for i, r := range c.Resources {
		field := fmt.Sprintf("component.resources[%d]", i)
		if err := validateElement(cd, field, "resource", r.ElementMeta, r.Type, r.Access, seen); err != nil {
			return err
		}
		if r.Relation != "" && r.Relation != RelationLocal && r.Relation != RelationExternal {
			return fmt.Errorf("component descriptor %s: %s.relation %q is neither local nor external", cd.Key(), field, r.Relation)
		}
	}
	seen = map[string]bool{}
	for i, s := range c.Sources {
		if err := validateElement(cd, fmt.Sprintf("component.sources[%d]", i), "source", s.ElementMeta, s.Type, s.Access, seen); err != nil {
			return err
		}
	}
	seen = map[string]bool{}
	for i, ref := range c.References {
		field := fmt.Sprintf("component.componentReferences[%d]", i)
		if ref.Name == "" || ref.ComponentName == "" || ref.Version == "" {
			return fmt.Errorf("component descriptor %s: %s needs name, componentName and version", cd.Key(), field)
		}
		id := identityKey(ref.ElementMeta)
		if seen[id] {
			return fmt.Errorf("component descriptor %s: %s: a second reference named %q", cd.Key(), field, ref.Name)
		}
		seen[id] = true
	}
	return nil
}

func validateElement(cd *ComponentDescriptor, field, kind string, m ElementMeta, typ string, access Access, seen map[string]bool) error {
	if m.Name == "" {
		return fmt.Errorf("component descriptor %s: %s.name is empty", cd.Key(), field)
	}
	if typ == "" {
		return fmt.Errorf("component descriptor %s: %s (%s %q) has no type", cd.Key(), field, kind, m.Name)
	}
	if access.Type == "" {
		return fmt.Errorf("component descriptor %s: %s (%s %q) has no access", cd.Key(), field, kind, m.Name)
	}
	id := identityKey(m)
	if seen[id] {
		return fmt.Errorf("component descriptor %s: %s: a second %s with the identity of %q", cd.Key(), field, kind, m.Name)
	}
	seen[id] = true
	return nil
}

// identityKey is an element's identity: name, version and extra identity.
func identityKey(m ElementMeta) string {
	b, _ := json.Marshal(map[string]any{"name": m.Name, "version": m.Version, "extra": m.ExtraIdentity})
	return string(b)
}
