package blueprint

import (
	"encoding/json"
	"fmt"
	"strings"
)

// TemplateBlueprintRef is a sub-installation's blueprint read from a
// component version: a cd:// resource URI relative to the parent's
// component (cd://resources/<name>,
// cd://componentReferences/<ref>/resources/<name>), written as a string or
// as {resourceName: <name>}, a resource of the parent's component.
type TemplateBlueprintRef struct {
	// URI is the cd:// resource URI.
	URI string
}

// UnmarshalJSON reads the string or the {resourceName} form.
func (r *TemplateBlueprintRef) UnmarshalJSON(data []byte) error {
	var uri string
	if err := json.Unmarshal(data, &uri); err == nil {
		r.URI = uri
		return nil
	}
	var named struct {
		ResourceName string `json:"resourceName"`
	}
	if err := json.Unmarshal(data, &named); err != nil || strings.TrimSpace(named.ResourceName) == "" {
		return fmt.Errorf("blueprint.ref must be a cd:// resource URI or {resourceName: <name>}")
	}
	r.URI = "cd://resources/" + named.ResourceName
	return nil
}

// MarshalJSON writes the URI.
func (r TemplateBlueprintRef) MarshalJSON() ([]byte, error) { return json.Marshal(r.URI) }
