package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TargetSpec describes where deploy items are applied and with which credentials.
// +kubebuilder:validation:XValidation:rule="!(has(self.config) && has(self.secretRef))",message="a target takes its configuration either inline (config) or from a Secret (secretRef), not both"
type TargetSpec struct {
	// Type of the target, e.g. landscaper.gardener.cloud/kubernetes-cluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Type string `json:"type"`
	// Config is the type-specific configuration; for kubernetes-cluster targets
	// {"kubeconfig": "<kubeconfig YAML>"}, {"kubeconfig": {"secretRef": {name,
	// key}}} or {"selfConfig": {"serviceAccount": {"name": ...}}}.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Config *AnyJSON `json:"config,omitempty"`
	// SecretRef reads the configuration from a Secret in the Target's
	// namespace instead: the value of key (the whole configuration), or
	// without key the Secret's data, one field per key.
	// +optional
	SecretRef *LocalSecretReference `json:"secretRef,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=tgt,categories=landscaper;terrace
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Context",type=string,JSONPath=`.metadata.labels.installation\.terrace\.dev/context`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.metadata.annotations.installation\.terrace\.dev/key`
// +kubebuilder:printcolumn:name="Environment",type=string,JSONPath=`.metadata.annotations.landscaper\.gardener\.cloud/environment`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Target is an environment deploy items are applied to, e.g. a cluster.
type Target struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TargetSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// TargetList is a list of Targets.
type TargetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Target `json:"items"`
}

// FullTargetType returns a Target type with its group: a short type without
// one (e.g. kubernetes-cluster) is Landscaper's
// (landscaper.gardener.cloud/kubernetes-cluster).
func FullTargetType(t string) string {
	if t == "" || strings.Contains(t, "/") {
		return t
	}
	return GroupName + "/" + t
}
