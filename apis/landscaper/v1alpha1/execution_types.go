package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DeployItemTemplate describes one DeployItem an Execution creates.
// +kubebuilder:validation:XValidation:rule="!has(self.dependsOn) || !(self.name in self.dependsOn)",message="a deploy item cannot depend on itself"
type DeployItemTemplate struct {
	// Name of the item inside the execution; unique within it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Type selects the deployer (DeployItem spec.type).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Type string `json:"type"`
	// Target the item is applied to.
	// +optional
	Target *ObjectReference `json:"target,omitempty"`
	// Labels are added to the created DeployItem.
	// +optional
	// +kubebuilder:validation:MaxProperties=128
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && size(self[k]) <= 63)",message="label keys are at most 317 bytes (a 253-byte prefix, '/', a 63-byte name) and label values at most 63 bytes"
	Labels map[string]string `json:"labels,omitempty"`
	// Config is the deployer-specific provider configuration.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	Config runtime.RawExtension `json:"config"`
	// DependsOn names items of this execution that must succeed before this one starts.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=63
	DependsOn []string `json:"dependsOn,omitempty"`
	// Timeout is the item's progressing timeout (DeployItem spec.timeout).
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`
	// UpdateOnChangeOnly: a job whose turn comes to this item finds it done,
	// without handing it the job, when its spec did not change since its
	// last job and that job succeeded (DeployItem spec.updateOnChangeOnly).
	// +optional
	UpdateOnChangeOnly bool `json:"updateOnChangeOnly,omitempty"`
	// OnDelete configures the item's deletion (DeployItem spec.onDelete).
	// +optional
	OnDelete *OnDeleteConfig `json:"onDelete,omitempty"`
}

// ExecutionSpec lists the deploy items of an execution.
type ExecutionSpec struct {
	// Context names the Context handed to every deploy item.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Context string `json:"context,omitempty"`
	// DeployItems are created, updated and deleted to match this list.
	// +optional
	// +kubebuilder:validation:MaxItems=500
	// +listType=map
	// +listMapKey=name
	DeployItems []DeployItemTemplate `json:"deployItems,omitempty"`
}

// ExecutionStatus is the execution's progress through its current job.
type ExecutionStatus struct {
	// Phase of the execution.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// JobID is the job handed to the execution.
	// +optional
	JobID string `json:"jobID,omitempty"`
	// JobIDFinished is the last job the execution finished.
	// +optional
	JobIDFinished string `json:"jobIDFinished,omitempty"`
	// ObservedGeneration is the generation the current job started from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions add detail to the phase.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastError is the last error the execution ran into.
	// +optional
	LastError *Error `json:"lastError,omitempty"`
	// DeployItemReferences lists the deploy items of the current (or last)
	// install job by their name in the spec: the job's item set, recorded
	// from the spec when the job started. The job runs these items; an item
	// added to the spec mid-job waits for the next job, one removed mid-job
	// is deleted by the next job.
	// +optional
	DeployItemReferences []NamedObjectReference `json:"deployItemRefs,omitempty"`
	// ExportReference points at the DataObject holding the items' exports.
	// +optional
	ExportReference *ObjectReference `json:"exportRef,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=exec,categories=landscaper;terrace
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.lastError.reason`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.lastError.message`,priority=1
// +kubebuilder:printcolumn:name="JobID",type=string,JSONPath=`.status.jobID`,priority=1
// +kubebuilder:printcolumn:name="JobIDFinished",type=string,JSONPath=`.status.jobIDFinished`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Execution expands into ordered DeployItems.
type Execution struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ExecutionSpec   `json:"spec,omitempty"`
	Status ExecutionStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ExecutionList is a list of Executions.
type ExecutionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Execution `json:"items"`
}
