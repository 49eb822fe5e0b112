package components

import (
	"context"
	"fmt"
	"strings"

	"github.com/terrace-dev/terrace/kit/ocm"
)

// URIScheme prefixes a resource URI: cd://resources/<name> is a resource
// of the component itself, cd://componentReferences/<ref>/resources/<name>
// one of a referenced component; references nest.
const URIScheme = "cd://"

// URI is a parsed resource URI.
type URI struct {
	// References are the component reference names walked, in order.
	References []string
	// Resource is the resource's name in the last component.
	Resource string
}

// String writes the URI back.
func (u URI) String() string {
	var b strings.Builder
	b.WriteString(URIScheme)
	for _, ref := range u.References {
		b.WriteString("componentReferences/" + ref + "/")
	}
	b.WriteString("resources/" + u.Resource)
	return b.String()
}

// ParseURI parses a cd:// resource URI.
func ParseURI(uri string) (URI, error) {
	rest, ok := strings.CutPrefix(uri, URIScheme)
	if !ok {
		return URI{}, fmt.Errorf("%q is not a component resource URI: it must start with %s", uri, URIScheme)
	}
	segs := strings.Split(rest, "/")
	var out URI
	for i := 0; i < len(segs); i += 2 {
		if i+1 >= len(segs) || segs[i+1] == "" {
			return URI{}, fmt.Errorf("%q: %q must be followed by a name", uri, segs[i])
		}
		switch segs[i] {
		case "componentReferences":
			out.References = append(out.References, segs[i+1])
		case "resources":
			if i+2 != len(segs) {
				return URI{}, fmt.Errorf("%q: resources/<name> must end the URI", uri)
			}
			out.Resource = segs[i+1]
		default:
			return URI{}, fmt.Errorf("%q: %q is neither componentReferences nor resources", uri, segs[i])
		}
	}
	if out.Resource == "" {
		return URI{}, fmt.Errorf("%q names no resource: it must end in resources/<name>", uri)
	}
	return out, nil
}

// ResolveURI finds the component and resource uri names, walking component
// references from the component from.
func (cv *ComponentVersion) ResolveURI(from *Component, uri URI) (*Component, *ocm.Resource, error) {
	c := from
	for _, ref := range uri.References {
		key, ok := c.references[ref]
		if !ok {
			return nil, nil, fmt.Errorf("%s: component %s has no component reference %q", uri, c.Key(), ref)
		}
		c = cv.Components[key]
	}
	res, err := c.Descriptor.Resource(uri.Resource, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", uri, err)
	}
	return c, res, nil
}

// BlueprintByURI reads the blueprint a sub-installation's blueprint.ref
// (a cd:// URI relative to the component from) names.
func (r *Resolver) BlueprintByURI(ctx context.Context, cv *ComponentVersion, from *Component, uri string) (*Blueprint, error) {
	parsed, err := ParseURI(uri)
	if err != nil {
		return nil, fmt.Errorf("blueprint.ref: %w", err)
	}
	c, res, err := cv.ResolveURI(from, parsed)
	if err != nil {
		return nil, fmt.Errorf("blueprint.ref: %w", err)
	}
	return r.Blueprint(ctx, c, ResourceRef{Name: res.Name, ExtraIdentity: res.ExtraIdentity})
}
