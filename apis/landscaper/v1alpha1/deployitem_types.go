package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DeployItemSpec is what a deployer of spec.type applies to a target.
type DeployItemSpec struct {
	// Type selects the deployer responsible for this item, e.g.
	// landscaper.gardener.cloud/kubernetes-manifest.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Type string `json:"type"`
	// Target is the Target the item is applied to. Only Targets in the item's own
	// namespace may be referenced.
	// +optional
	Target *ObjectReference `json:"target,omitempty"`
	// Context names the Context object in the item's namespace ("default" if empty).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Context string `json:"context,omitempty"`
	// Config is the deployer-specific provider configuration; only the
	// deployer of spec.type reads it.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	Config *runtime.RawExtension `json:"config,omitempty"`
	// Timeout is the progressing timeout of the item: when it is Progressing for
	// longer, the execution controller aborts it. Defaults to the controller's
	// --progressing-timeout (10m); "none" disables it.
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`
	// UpdateOnChangeOnly: the execution controller hands a job to this item
	// only when its spec changed since its last job or that job did not
	// succeed.
	// +optional
	UpdateOnChangeOnly bool `json:"updateOnChangeOnly,omitempty"`
	// OnDelete configures the item's deletion.
	// +optional
	OnDelete *OnDeleteConfig `json:"onDelete,omitempty"`
}

// OnDeleteConfig configures the deletion of a deploy item.
type OnDeleteConfig struct {
	// SkipUninstallIfClusterRemoved deletes the item without uninstalling
	// (as delete-without-uninstall does) when its Target is gone or being
	// deleted: the cluster it names can no longer be reached.
	// +optional
	SkipUninstallIfClusterRemoved bool `json:"skipUninstallIfClusterRemoved,omitempty"`
}

// DeployerInformation identifies the deployer that last handled an item.
type DeployerInformation struct {
	// Name of the deployer.
	Name string `json:"name"`
	// Identity of the deployer instance (several deployers of one type may run).
	Identity string `json:"identity"`
	// Version of the deployer.
	// +optional
	Version string `json:"version,omitempty"`
}

// DeployItemStatus is written by the deployer (phase, provider status) and by
// the execution controller (job ID, timeouts); each writes only its own fields.
type DeployItemStatus struct {
	// Phase is the item's phase: Init, Progressing, Deleting, Succeeded, Failed.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// JobID is the job the execution controller handed to this item.
	// +optional
	JobID string `json:"jobID,omitempty"`
	// JobIDFinished is the last job the deployer finished on this item.
	// +optional
	JobIDFinished string `json:"jobIDFinished,omitempty"`
	// ObservedGeneration is the generation the deployer last started a job for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastReconcileTime is when the current job was picked up.
	// +optional
	LastReconcileTime *metav1.Time `json:"lastReconcileTime,omitempty"`
	// Conditions add detail to the phase.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastError is the last error the item ran into.
	// +optional
	LastError *Error `json:"lastError,omitempty"`
	// Deployer identifies the deployer that last handled the item.
	// +optional
	Deployer *DeployerInformation `json:"deployer,omitempty"`
	// ProviderStatus is the deployer-specific status.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	ProviderStatus *runtime.RawExtension `json:"providerStatus,omitempty"`
	// ExportReference points at the Secret holding the item's exports.
	// +optional
	ExportReference *ObjectReference `json:"exportRef,omitempty"`
}

// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=di,categories=landscaper;terrace
// +kubebuilder:selectablefield:JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Execution",type=string,JSONPath=`.metadata.labels.execution\.landscaper\.gardener\.cloud/managed-by`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.lastError.reason`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.lastError.message`,priority=1
// +kubebuilder:printcolumn:name="JobID",type=string,JSONPath=`.status.jobID`,priority=1
// +kubebuilder:printcolumn:name="JobIDFinished",type=string,JSONPath=`.status.jobIDFinished`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// DeployItem is one unit of work for a deployer: apply spec.config of type
// spec.type to spec.target.
type DeployItem struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DeployItemSpec   `json:"spec"`
	Status DeployItemStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// DeployItemList is a list of DeployItems.
type DeployItemList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeployItem `json:"items"`
}
