package components

import (
	"encoding/json"
	"fmt"
	"strings"
)

// getResource returns the one resource of cd whose identity matches the
// key-value pairs, e.g. getResource .cd "name" "chart".
func (t *Templating) getResource(cd any, keyValues ...string) (map[string]any, error) {
	found, key, err := matching("getResource", cd, "resources", keyValues)
	if err != nil {
		return nil, err
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("getResource: component %s has no resource with %s", key, strings.Join(keyValues, "="))
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("getResource: component %s has %d resources with %s: give more of the identity (version, extraIdentity)", key, len(found), strings.Join(keyValues, "="))
}

// getResources returns every resource of cd whose identity matches the
// key-value pairs; none is an empty list.
func (t *Templating) getResources(cd any, keyValues ...string) ([]any, error) {
	found, _, err := matching("getResources", cd, "resources", keyValues)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(found))
	for i, f := range found {
		out[i] = f
	}
	return out, nil
}

// getComponent returns the descriptor of the version cd's component
// reference matching the key-value pairs resolved to.
func (t *Templating) getComponent(cd any, keyValues ...string) (map[string]any, error) {
	found, key, err := matching("getComponent", cd, "componentReferences", keyValues)
	if err != nil {
		return nil, err
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("getComponent: component %s has %d component references with %s, not one", key, len(found), strings.Join(keyValues, "="))
	}
	parent, ok := t.cv.Components[key]
	if !ok {
		return nil, fmt.Errorf("getComponent: component %s is not one of the installation's component versions", key)
	}
	refName, _ := found[0]["name"].(string)
	return t.descriptor(parent.references[refName]), nil
}

// getResourceKey returns the ResourceKey of the resource a cd:// URI names,
// relative to the installation's component.
func (t *Templating) getResourceKey(uri string) (string, error) {
	parsed, err := ParseURI(uri)
	if err != nil {
		return "", fmt.Errorf("getResourceKey: %w", err)
	}
	c, res, err := t.cv.ResolveURI(t.cv.Root, parsed)
	if err != nil {
		return "", fmt.Errorf("getResourceKey: %w", err)
	}
	if c.RepositoryContext == nil {
		return "", fmt.Errorf("getResourceKey: %s: component %s has no repository context for a deployer to read it from", uri, c.Key())
	}
	return EncodeResourceKey(ResourceKey{
		RepositoryContext: c.RepositoryContext,
		ComponentName:     c.Descriptor.Component.Name,
		Version:           c.Descriptor.Component.Version,
		Resource:          ResourceIdentity{Name: res.Name, ExtraIdentity: res.ExtraIdentity},
	})
}

// getRepositoryContext returns cd's effective repository context: the last
// of its repositoryContexts, or nil.
func getRepositoryContext(cd any) (any, error) {
	comp, _, err := componentOf("getRepositoryContext", cd)
	if err != nil {
		return nil, err
	}
	list, _ := comp["repositoryContexts"].([]any)
	if len(list) == 0 {
		return nil, nil
	}
	return copyJSON(list[len(list)-1]), nil
}

// matching returns copies of the elements of cd's list field whose
// identity matches the key-value pairs, and cd's "<name>:<version>".
func matching(fn string, cd any, field string, keyValues []string) ([]map[string]any, string, error) {
	if len(keyValues)%2 != 0 {
		return nil, "", fmt.Errorf("%s: the identity is given as key-value pairs, got an odd number (%d) of strings", fn, len(keyValues))
	}
	comp, key, err := componentOf(fn, cd)
	if err != nil {
		return nil, "", err
	}
	list, _ := comp[field].([]any)
	var out []map[string]any
	for _, el := range list {
		m, ok := el.(map[string]any)
		if ok && identityMatches(m, keyValues) {
			out = append(out, copyJSON(m).(map[string]any))
		}
	}
	return out, key, nil
}

// identityMatches tells whether each key-value pair equals the element's
// identity attribute: name, version, componentName or an extraIdentity key.
func identityMatches(el map[string]any, keyValues []string) bool {
	extra, _ := el["extraIdentity"].(map[string]any)
	for i := 0; i < len(keyValues); i += 2 {
		k, want := keyValues[i], keyValues[i+1]
		have, ok := el[k]
		if k != "name" && k != "version" && k != "componentName" {
			have, ok = extra[k]
		}
		if s, isString := have.(string); !ok || !isString || s != want {
			return false
		}
	}
	return true
}

// componentOf reads the component of a descriptor given to a function.
func componentOf(fn string, cd any) (map[string]any, string, error) {
	m, ok := cd.(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("%s: the first argument must be a component descriptor such as .cd, got %T", fn, cd)
	}
	comp, ok := m["component"].(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("%s: the first argument has no component: not a component descriptor", fn)
	}
	name, _ := comp["name"].(string)
	version, _ := comp["version"].(string)
	return comp, name + ":" + version, nil
}

func copyJSON(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

// parseOCIRef splits an OCI reference (host[:port]/path:tag, or
// ...@<digest>) into repository and version: the digest when it has one,
// else the tag. References without a host (nginx:1.0) are split alike.
func parseOCIRef(ref string) ([2]string, error) {
	repo, version := ref, ""
	if at := strings.Index(ref, "@"); at >= 0 {
		repo, version = ref[:at], ref[at+1:]
		if colon := strings.LastIndex(repo, ":"); colon > strings.LastIndex(repo, "/") {
			repo = repo[:colon]
		}
	} else if colon := strings.LastIndex(ref, ":"); colon > strings.LastIndex(ref, "/") {
		repo, version = ref[:colon], ref[colon+1:]
	}
	if repo == "" || version == "" || strings.ContainsAny(ref, " \t\n") {
		return [2]string{}, fmt.Errorf("parseOCIRef: %q is not an OCI reference with a tag or digest (host/repository:tag)", ref)
	}
	return [2]string{repo, version}, nil
}

func ociRefRepo(ref string) (string, error) {
	parts, err := parseOCIRef(ref)
	return parts[0], err
}

func ociRefVersion(ref string) (string, error) {
	parts, err := parseOCIRef(ref)
	return parts[1], err
}
