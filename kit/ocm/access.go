package ocm

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Access types Terrace reads; each has legacy names it reads too.
const (
	AccessTypeLocalBlob   = "localBlob"
	AccessTypeOCIArtifact = "ociArtifact"

	// Legacy and alias names.
	accessTypeLocalOCIBlob        = "localOciBlob"
	accessTypeLocalFilesystemBlob = "localFilesystemBlob"
	accessTypeOCIRegistry         = "ociRegistry"
	accessTypeOCIImage            = "OCIImage"
)

// Access is an access specification: its type and every field, kept as
// read so that types Terrace does not know survive a round trip.
type Access struct {
	Type string
	// Fields holds every field, "type" included.
	Fields map[string]any
}

// MarshalJSON writes the fields.
func (a Access) MarshalJSON() ([]byte, error) {
	if a.Fields == nil {
		return json.Marshal(map[string]any{"type": a.Type})
	}
	return json.Marshal(a.Fields)
}

// UnmarshalJSON reads an object with a string "type".
func (a *Access) UnmarshalJSON(data []byte) error {
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("access is not an object: %w", err)
	}
	t, _ := fields["type"].(string)
	if t == "" {
		return fmt.Errorf("access has no type")
	}
	*a = Access{Type: t, Fields: fields}
	return nil
}

// baseType is the type without its "/v1" version suffix.
func (a Access) baseType() string {
	t, _, _ := strings.Cut(a.Type, "/")
	return t
}

func (a Access) str(key string) string {
	s, _ := a.Fields[key].(string)
	return s
}

// LocalBlobAccess is a blob stored with the component version.
type LocalBlobAccess struct {
	// LocalReference is the blob's digest in an OCI registry (a file name
	// in a component archive).
	LocalReference string
	MediaType      string
	// ReferenceName is the name hint of a blob that is an OCI artifact.
	ReferenceName string
	// GlobalAccess is another access to the same content, if any.
	GlobalAccess map[string]any
}

// IsLocalBlob tells whether a is a local blob under any of its names.
func (a Access) IsLocalBlob() bool {
	switch a.baseType() {
	case AccessTypeLocalBlob, accessTypeLocalOCIBlob, accessTypeLocalFilesystemBlob:
		return true
	}
	return false
}

// LocalBlob returns a as a local blob access: localBlob, or the legacy
// localOciBlob (digest) and localFilesystemBlob (filename).
func (a Access) LocalBlob() (LocalBlobAccess, error) {
	l := LocalBlobAccess{MediaType: a.str("mediaType"), ReferenceName: a.str("referenceName")}
	switch a.baseType() {
	case AccessTypeLocalBlob:
		l.LocalReference = a.str("localReference")
		l.GlobalAccess, _ = a.Fields["globalAccess"].(map[string]any)
	case accessTypeLocalOCIBlob:
		l.LocalReference = a.str("digest")
	case accessTypeLocalFilesystemBlob:
		l.LocalReference = a.str("filename")
	default:
		return l, fmt.Errorf("access of type %q is not a local blob", a.Type)
	}
	if l.LocalReference == "" {
		return l, fmt.Errorf("access of type %q names no blob (localReference)", a.Type)
	}
	return l, nil
}

// NewLocalBlobAccess is the localBlob access of a blob with the given digest
// and media type.
func NewLocalBlobAccess(l LocalBlobAccess) Access {
	fields := map[string]any{
		"type":           AccessTypeLocalBlob,
		"localReference": l.LocalReference,
		"mediaType":      l.MediaType,
	}
	if l.ReferenceName != "" {
		fields["referenceName"] = l.ReferenceName
	}
	if l.GlobalAccess != nil {
		fields["globalAccess"] = l.GlobalAccess
	}
	return Access{Type: AccessTypeLocalBlob, Fields: fields}
}

// IsOCIArtifact tells whether a is an OCI artifact access under any of its
// names.
func (a Access) IsOCIArtifact() bool {
	switch a.baseType() {
	case AccessTypeOCIArtifact, accessTypeOCIRegistry, accessTypeOCIImage:
		return true
	}
	return false
}

// OCIArtifactReference returns the image reference of an OCI artifact
// access (ociArtifact, or the legacy ociRegistry and OCIImage).
func (a Access) OCIArtifactReference() (string, error) {
	if !a.IsOCIArtifact() {
		return "", fmt.Errorf("access of type %q is not an OCI artifact", a.Type)
	}
	ref := a.str("imageReference")
	if ref == "" {
		return "", fmt.Errorf("access of type %q has no imageReference", a.Type)
	}
	return ref, nil
}

// NewOCIArtifactAccess is the ociArtifact access of an image reference.
func NewOCIArtifactAccess(imageReference string) Access {
	return Access{Type: AccessTypeOCIArtifact, Fields: map[string]any{
		"type":           AccessTypeOCIArtifact,
		"imageReference": imageReference,
	}}
}

// String is the access in short: its type and its fields' names.
func (a Access) String() string {
	keys := make([]string, 0, len(a.Fields))
	for k := range a.Fields {
		if k != "type" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return a.Type + "{" + strings.Join(keys, ",") + "}"
}
