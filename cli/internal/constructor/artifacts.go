package constructor

import (
	"encoding/json"
	"fmt"

	"github.com/terrace-dev/terrace/kit/ocm"
)

// element is what resources and sources share once built.
type element struct {
	meta   ocm.ElementMeta
	access ocm.Access
	blob   *ocm.LocalBlob
}

// element builds an artifact's identity and access: the local blob of its
// input, or its access as written.
func (b *builder) element(c *component, a *artifact, at []any, kind string) (element, error) {
	if a.Name == "" {
		return element{}, b.errorf(at, "name", "a %s needs a name", kind)
	}
	if a.Type == "" {
		return element{}, b.errorf(at, "type", "%s %q needs a type", kind, a.Name)
	}
	el := element{meta: ocm.ElementMeta{Name: a.Name, Version: a.Version, ExtraIdentity: a.ExtraIdentity, Labels: labels(a.Labels)}}
	switch {
	case a.Input != nil && a.Access != nil:
		return element{}, b.errorf(at, "input", "%s %q has both input and access: give one", kind, a.Name)
	case a.Input != nil:
		blob, referenceName, err := b.buildInput(a.Input, append(append([]any{}, at...), "input"))
		if err != nil {
			return element{}, err
		}
		if el.meta.Version == "" {
			el.meta.Version = c.Version
		}
		el.blob = &blob
		el.access = ocm.NewLocalBlobAccess(ocm.LocalBlobAccess{LocalReference: blob.Digest.String(), MediaType: blob.MediaType, ReferenceName: referenceName})
	case a.Access != nil:
		access, err := toAccess(a.Access)
		if err != nil {
			return element{}, b.errorf(at, "access", "%s %q: %v", kind, a.Name, err)
		}
		if access.IsOCIArtifact() {
			if _, err := access.OCIArtifactReference(); err != nil {
				return element{}, b.errorf(at, "access", "%s %q: %v", kind, a.Name, err)
			}
		}
		el.access = access
	default:
		return element{}, b.errorf(at, "", "%s %q needs an input (dir, file, helm) or an access", kind, a.Name)
	}
	return el, nil
}

func (b *builder) resource(c *component, a *artifact, at []any) (ocm.Resource, *ocm.LocalBlob, error) {
	el, err := b.element(c, a, at, "resource")
	if err != nil {
		return ocm.Resource{}, nil, err
	}
	relation := a.Relation
	if relation == "" {
		relation = ocm.RelationExternal
		if a.Input != nil {
			relation = ocm.RelationLocal
		}
	}
	if relation != ocm.RelationLocal && relation != ocm.RelationExternal {
		return ocm.Resource{}, nil, b.errorf(at, "relation", "resource %q: relation %q is neither local nor external", a.Name, relation)
	}
	if el.meta.Version == "" && relation == ocm.RelationLocal {
		el.meta.Version = c.Version
	}
	var srcRefs []json.RawMessage
	for _, r := range a.SourceRefs {
		raw, _ := json.Marshal(r)
		srcRefs = append(srcRefs, raw)
	}
	return ocm.Resource{ElementMeta: el.meta, Type: a.Type, Relation: relation, SourceRefs: srcRefs, Access: el.access, Digest: a.Digest}, el.blob, nil
}

func (b *builder) source(c *component, a *artifact, at []any) (ocm.Source, *ocm.LocalBlob, error) {
	el, err := b.element(c, a, at, "source")
	if err != nil {
		return ocm.Source{}, nil, err
	}
	if el.meta.Version == "" {
		el.meta.Version = c.Version
	}
	return ocm.Source{ElementMeta: el.meta, Type: a.Type, Access: el.access}, el.blob, nil
}

// toAccess converts an access as written in YAML.
func toAccess(fields map[string]any) (ocm.Access, error) {
	raw, err := json.Marshal(fields)
	if err != nil {
		return ocm.Access{}, fmt.Errorf("access is not representable as JSON: %w", err)
	}
	var a ocm.Access
	if err := json.Unmarshal(raw, &a); err != nil {
		return ocm.Access{}, err
	}
	return a, nil
}
