package ocm

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// maxResourceKeyLength bounds a key read back from a deployer's config.
const maxResourceKeyLength = 16 << 10

// ResourceKey identifies one resource of one component version in one
// repository: what getResourceKey returns and the helm deployer's
// chart.resourceRef holds. Encoded, it is the unpadded base64url of its
// JSON:
//
//	{"repositoryContext": {"type": "OCIRegistry", "baseUrl": "..."},
//	 "componentName": "...", "version": "...",
//	 "resource": {"name": "...", "extraIdentity": {...}}}
//
// A deployer decodes it, resolves the component version from the
// repository context (with its own pull secrets) and reads the resource
// by its identity.
type ResourceKey struct {
	RepositoryContext *lsv1alpha1.RepositoryContext `json:"repositoryContext"`
	ComponentName     string                        `json:"componentName"`
	Version           string                        `json:"version"`
	Resource          ResourceIdentity              `json:"resource"`
}

// ResourceIdentity is a resource's identity within its component version.
type ResourceIdentity struct {
	Name          string            `json:"name"`
	ExtraIdentity map[string]string `json:"extraIdentity,omitempty"`
}

// EncodeResourceKey writes k as a key string.
func EncodeResourceKey(k ResourceKey) (string, error) {
	data, err := json.Marshal(k)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(data), nil
}

// DecodeResourceKey reads a key string; a malformed one is an error saying
// what is wrong with it.
func DecodeResourceKey(s string) (ResourceKey, error) {
	var k ResourceKey
	if len(s) > maxResourceKeyLength {
		return k, fmt.Errorf("the resource key is %d characters long, more than a key can be (%d)", len(s), maxResourceKeyLength)
	}
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return k, fmt.Errorf("the resource key is not unpadded base64url (as getResourceKey writes it): %w", err)
	}
	if err := json.Unmarshal(data, &k); err != nil {
		return k, fmt.Errorf("the resource key does not hold a resource identity: %w", err)
	}
	switch {
	case k.RepositoryContext == nil:
		return k, fmt.Errorf("the resource key names no repository context")
	case k.ComponentName == "" || k.Version == "":
		return k, fmt.Errorf("the resource key names no component version")
	case k.Resource.Name == "":
		return k, fmt.Errorf("the resource key names no resource")
	}
	return k, nil
}
