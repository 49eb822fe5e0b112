package v1alpha1

import (
	"bytes"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnyJSON holds arbitrary JSON (object, list or scalar) verbatim. Blueprint
// data, DataObject values and data mappings are user-defined, so the schema
// keeps whatever the user wrote instead of pruning it. Fields of this type
// carry the Schemaless and PreserveUnknownFields markers, so scalars and lists
// are accepted as well as objects.
type AnyJSON struct {
	RawMessage json.RawMessage `json:"-"`
}

// NewAnyJSON wraps raw JSON bytes.
func NewAnyJSON(raw []byte) AnyJSON { return AnyJSON{RawMessage: raw} }

// MarshalJSON writes the raw value, or null when empty.
func (a AnyJSON) MarshalJSON() ([]byte, error) {
	if len(a.RawMessage) == 0 {
		return []byte("null"), nil
	}
	return a.RawMessage, nil
}

// UnmarshalJSON keeps a copy of the raw value; null becomes empty.
func (a *AnyJSON) UnmarshalJSON(data []byte) error {
	if bytes.Equal(data, []byte("null")) {
		a.RawMessage = nil
		return nil
	}
	a.RawMessage = append(a.RawMessage[:0], data...)
	return nil
}

// ObjectReference names an object, optionally in another namespace.
type ObjectReference struct {
	// Name of the referenced object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the referenced object; empty means the referrer's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// NamedObjectReference is a reference with a logical name, used in status
// lists of sub-objects.
type NamedObjectReference struct {
	// Name is the logical name of the reference (e.g. the sub-installation's
	// template name or the deploy item's name in its execution).
	Name string `json:"name"`
	// Reference points at the object.
	Reference ObjectReference `json:"ref"`
}

// LocalSecretReference points at one key of a Secret in the referrer's namespace.
type LocalSecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key in the Secret's data.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// Error describes the last error an object ran into, in the shape the
// deployer contract prescribes.
type Error struct {
	// Operation is the operation that failed (e.g. WaitingForPickup, Reconcile).
	Operation string `json:"operation"`
	// Reason is a machine-readable CamelCase reason (e.g. PickupTimeout).
	Reason string `json:"reason"`
	// Message is a human-readable description.
	Message string `json:"message"`
	// Codes classify the error (e.g. ERR_TIMEOUT).
	// +optional
	Codes []ErrorCode `json:"codes,omitempty"`
	// LastTransitionTime is when this error first appeared.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// LastUpdateTime is when this error was last observed.
	// +optional
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`
}

// ErrorCode classifies an Error.
type ErrorCode string

// Duration is a time span written as a Go duration string ("10m", "1h30m").
// It is a string on the wire, so the schema can check its shape at apply time.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:Pattern=`^(none|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
type Duration string
