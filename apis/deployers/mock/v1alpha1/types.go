// Package v1alpha1 holds the mock deployer's provider configuration,
// mock.deployer.landscaper.gardener.cloud/v1alpha1: the mock deployer ends a
// job in the phase the configuration names, with the given provider status and
// exports, without touching any cluster. Tests use it to drive executions and
// installations.
//
// +kubebuilder:object:generate=true
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is the group version of these types.
var SchemeGroupVersion = schema.GroupVersion{Group: "mock.deployer.landscaper.gardener.cloud", Version: "v1alpha1"}

var (
	// SchemeBuilder collects the functions that add these types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &ProviderConfiguration{})
		return nil
	})
	// AddToScheme adds these types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// +kubebuilder:object:root=true

// ProviderConfiguration is a mock deploy item's spec.config.
type ProviderConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	// Phase the job ends in: Succeeded (default) or Failed. Progressing keeps
	// the item running (to exercise timeouts).
	// +optional
	Phase string `json:"phase,omitempty"`
	// InitialPhase is Landscaper's phase of a job when it starts, used when
	// Phase is not set: Succeeded, Failed or Progressing. Every job starts
	// afresh, so it is the phase each job of such an item ends in.
	// +optional
	InitialPhase string `json:"initialPhase,omitempty"`
	// ProviderStatus is copied into the item's status.providerStatus.
	// +optional
	ProviderStatus *runtime.RawExtension `json:"providerStatus,omitempty"`
	// Export is written to the item's export Secret.
	// +optional
	Export *runtime.RawExtension `json:"export,omitempty"`
	// Delay keeps the item Progressing for this long (e.g. "2s") before it ends
	// in Phase; the deployer requeues instead of blocking a worker.
	// +optional
	Delay *metav1.Duration `json:"delay,omitempty"`
	// ContinuousReconcile runs a Succeeded item again on a schedule: at most
	// one of cron and every.
	// +optional
	ContinuousReconcile *ContinuousReconcileSpec `json:"continuousReconcile,omitempty"`
}

// ContinuousReconcileSpec says when a Succeeded item is reconciled again.
type ContinuousReconcileSpec struct {
	// Cron is a five-field crontab schedule, in UTC (e.g. "0 */6 * * *").
	// +optional
	Cron string `json:"cron,omitempty"`
	// Every is the interval between reconciles (e.g. "5m").
	// +optional
	Every *metav1.Duration `json:"every,omitempty"`
}
