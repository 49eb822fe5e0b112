package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BlueprintFileName is the file of an inline blueprint's filesystem that holds
// the blueprint itself.
const BlueprintFileName = "blueprint.yaml"

// InlineBlueprint is a blueprint carried in the installation itself.
type InlineBlueprint struct {
	// Filesystem maps file names to their content. It must hold blueprint.yaml;
	// sub-installation templates may reference other files in it.
	// +kubebuilder:validation:XValidation:rule="'blueprint.yaml' in self",message="an inline blueprint's filesystem must contain blueprint.yaml"
	// +kubebuilder:validation:MaxProperties=1000
	Filesystem map[string]string `json:"filesystem"`
}

// BlueprintDefinition says where an installation's blueprint comes from:
// carried inline, or a resource of the installation's component version.
// +kubebuilder:validation:XValidation:rule="has(self.inline) != has(self.ref)",message="spec.blueprint needs exactly one of inline and ref"
type BlueprintDefinition struct {
	// Inline is a blueprint carried in the installation.
	// +optional
	Inline *InlineBlueprint `json:"inline,omitempty"`
	// Reference names the resource of the installation's component version
	// (spec.componentDescriptor) that holds the blueprint.
	// +optional
	Reference *BlueprintReference `json:"ref,omitempty"`
}

// DataImport imports one data value.
// +kubebuilder:validation:XValidation:rule="(has(self.dataRef) ? 1 : 0) + (has(self.secretRef) ? 1 : 0) + (has(self.configMapRef) ? 1 : 0) == 1",message="a data import needs exactly one of dataRef, secretRef, configMapRef"
type DataImport struct {
	// Name of the import as the blueprint declares it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// DataRef names a DataObject in the installation's namespace (or an export
	// name of a sibling, which is a DataObject the controller writes).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	DataRef string `json:"dataRef,omitempty"`
	// SecretRef reads the value from a Secret key.
	// +optional
	SecretRef *LocalSecretReference `json:"secretRef,omitempty"`
	// ConfigMapRef reads the value from a ConfigMap key.
	// +optional
	ConfigMapRef *LocalConfigMapReference `json:"configMapRef,omitempty"`
}

// LocalConfigMapReference points at one key of a ConfigMap in the referrer's namespace.
type LocalConfigMapReference struct {
	// Name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key in the ConfigMap's data.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// TargetImport imports one Target, a list of Targets (a blueprint's
// targetList import) or a map of them (a targetMap import).
// +kubebuilder:validation:XValidation:rule="(has(self.target) ? 1 : 0) + (has(self.targets) ? 1 : 0) + (has(self.targetListRef) ? 1 : 0) + (has(self.targetMap) ? 1 : 0) + (has(self.targetMapRef) ? 1 : 0) == 1",message="a target import needs exactly one of target, targets, targetListRef, targetMap, targetMapRef"
type TargetImport struct {
	// Name of the import as the blueprint declares it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Target names a Target in the installation's namespace, or an export of a
	// sibling; in a sub-installation "<list import>[<index>]" or
	// "<map import>[<key>]" names one Target of a parent's targetList or
	// targetMap import.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Target string `json:"target,omitempty"`
	// Targets names the Targets of a targetList import, in order. An empty
	// list is an empty targetList (nil is none, which the API server prunes).
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Targets []string `json:"targets"`
	// TargetListReference names a targetList import of the parent
	// installation, which a sub-installation imports as a whole.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TargetListReference string `json:"targetListRef,omitempty"`
	// TargetMap maps the keys of a targetMap import to Target names.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	TargetMap map[string]string `json:"targetMap,omitempty"`
	// TargetMapReference names a targetMap import of the parent
	// installation, which a sub-installation imports as a whole.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TargetMapReference string `json:"targetMapRef,omitempty"`
}

// InstallationImports are the values an installation reads.
type InstallationImports struct {
	// Data imports.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	Data []DataImport `json:"data,omitempty"`
	// Target imports.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	Targets []TargetImport `json:"targets,omitempty"`
}

// DataExport exports one data value as a DataObject.
type DataExport struct {
	// Name of the export as the blueprint declares it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// DataRef is the name of the DataObject written.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	DataRef string `json:"dataRef"`
}

// TargetExport exports one Target.
type TargetExport struct {
	// Name of the export as the blueprint declares it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Target is the name of the Target written.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Target string `json:"target"`
}

// InstallationExports are the values an installation writes.
type InstallationExports struct {
	// Data exports.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	Data []DataExport `json:"data,omitempty"`
	// Target exports.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	Targets []TargetExport `json:"targets,omitempty"`
}

// InstallationSpec describes what an installation installs.
type InstallationSpec struct {
	// Context names the Context object of the installation ("default" if empty).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Context string `json:"context,omitempty"`
	// ComponentDescriptor names the component version (OCM) the blueprint's
	// ref and the templates' .cd and getResource read from.
	// +optional
	ComponentDescriptor *ComponentDescriptorDefinition `json:"componentDescriptor,omitempty"`
	// Blueprint is the installation's blueprint.
	Blueprint BlueprintDefinition `json:"blueprint"`
	// Imports are read before sub-objects are templated.
	// +optional
	Imports InstallationImports `json:"imports,omitempty"`
	// ImportDataMappings derive further import values by templating.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	ImportDataMappings map[string]AnyJSON `json:"importDataMappings,omitempty"`
	// Exports are written when the installation completes.
	// +optional
	Exports InstallationExports `json:"exports,omitempty"`
	// ExportDataMappings derive export values by templating.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	ExportDataMappings map[string]AnyJSON `json:"exportDataMappings,omitempty"`
	// AutomaticReconcile starts new jobs of a root installation on its own,
	// a while after its last job finished.
	// +optional
	AutomaticReconcile *AutomaticReconcile `json:"automaticReconcile,omitempty"`
}

// Annotations of installations beside the operation annotation.
const (
	// ReconcileIfChangedAnnotation ("true") on a root installation starts a
	// job whenever its spec's generation differs from the one the last job
	// started from, without the reconcile annotation.
	ReconcileIfChangedAnnotation = GroupName + "/reconcile-if-changed"
	// TouchAnnotation only causes a watch event: the controller removes it.
	TouchAnnotation = GroupName + "/touch"
)

// ConditionAutomaticReconcile says what automaticReconcile has scheduled.
const ConditionAutomaticReconcile = "AutomaticReconcile"

// AutomaticReconcile configures automatically repeated jobs of a root
// installation. It never starts the first job.
type AutomaticReconcile struct {
	// SucceededReconcile repeats jobs of an installation whose last job
	// succeeded. Unset: none.
	// +optional
	SucceededReconcile *SucceededReconcile `json:"succeededReconcile,omitempty"`
	// FailedReconcile repeats jobs of an installation whose last job ended
	// Failed or DeleteFailed. Unset: none.
	// +optional
	FailedReconcile *FailedReconcile `json:"failedReconcile,omitempty"`
}

// SucceededReconcile configures the jobs repeated after a job succeeded.
type SucceededReconcile struct {
	// Interval between the end of a succeeded job and the next one; 24h if unset.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self != 'none' && duration(self) > duration('0s')",message="interval must be a positive duration such as 5m"
	Interval *Duration `json:"interval,omitempty"`
	// CronSpec is a five-field crontab schedule (minute hour day-of-month
	// month day-of-week, UTC); when set, the next job is due at its first
	// time after the last job ended, and Interval is not used.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^\s*\S+(\s+\S+){4}\s*$`
	CronSpec string `json:"cronSpec,omitempty"`
}

// FailedReconcile configures the jobs repeated after a job failed.
type FailedReconcile struct {
	// NumberOfReconciles limits the automatic jobs after failed ones; the
	// count starts anew when a job succeeds, the spec changes or a job is
	// started by the reconcile annotation. Unset: no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NumberOfReconciles *int32 `json:"numberOfReconciles,omitempty"`
	// Interval between the end of a failed job and the next one; 5m if unset.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self != 'none' && duration(self) > duration('0s')",message="interval must be a positive duration such as 5m"
	Interval *Duration `json:"interval,omitempty"`
	// CronSpec is a five-field crontab schedule (minute hour day-of-month
	// month day-of-week, UTC); when set, the next job is due at its first
	// time after the last job ended, and Interval is not used.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^\s*\S+(\s+\S+){4}\s*$`
	CronSpec string `json:"cronSpec,omitempty"`
}

// AutomaticReconcileStatus is what automaticReconcile last started.
type AutomaticReconcileStatus struct {
	// Generation is the installation's generation when the job started.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// NumberOfReconciles counts the automatic jobs started in a row after failed ones.
	// +optional
	NumberOfReconciles int32 `json:"numberOfReconciles,omitempty"`
	// LastReconcileTime is when the last automatic job started.
	// +optional
	LastReconcileTime *metav1.Time `json:"lastReconcileTime,omitempty"`
	// OnFailed is true when the last automatic job followed a failed one.
	// +optional
	OnFailed bool `json:"onFailed,omitempty"`
	// JobID is the job the last automatic start started.
	// +optional
	JobID string `json:"jobID,omitempty"`
}

// InstallationStatus is the installation's progress through its current job.
type InstallationStatus struct {
	// Phase of the installation (seed 002's installation and deletion flows).
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// JobID is the current job; generated on a root installation, handed down otherwise.
	// +optional
	JobID string `json:"jobID,omitempty"`
	// JobIDFinished is the last job the installation finished.
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
	// LastError is the last error the installation ran into.
	// +optional
	LastError *Error `json:"lastError,omitempty"`
	// ImportsHash is the hash of the imports read in the Init phase; Completing
	// fails the job if the imports changed meanwhile.
	// +optional
	ImportsHash string `json:"importsHash,omitempty"`
	// InstallationReferences lists the sub-installations by template name.
	// +optional
	InstallationReferences []NamedObjectReference `json:"installationRefs,omitempty"`
	// ExecutionReference points at the installation's execution.
	// +optional
	ExecutionReference *ObjectReference `json:"executionRef,omitempty"`
	// AutomaticReconcileStatus is what spec.automaticReconcile last started.
	// +optional
	AutomaticReconcileStatus *AutomaticReconcileStatus `json:"automaticReconcileStatus,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=inst,categories=landscaper;terrace
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Execution",type=string,JSONPath=`.status.executionRef.name`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.lastError.reason`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.lastError.message`,priority=1
// +kubebuilder:printcolumn:name="JobID",type=string,JSONPath=`.status.jobID`,priority=1
// +kubebuilder:printcolumn:name="JobIDFinished",type=string,JSONPath=`.status.jobIDFinished`,priority=1
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=`.status.conditions[?(@.type=="AutomaticReconcile")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Installation instantiates a blueprint: it templates sub-installations and an
// execution from its imports, and writes its exports.
type Installation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InstallationSpec   `json:"spec"`
	Status InstallationStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// InstallationList is a list of Installations.
type InstallationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Installation `json:"items"`
}
