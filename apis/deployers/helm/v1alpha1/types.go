// Package v1alpha1 holds the helm deployer's provider configuration and
// status, helm.deployer.landscaper.gardener.cloud/v1alpha1, wire-compatible
// with the provider configuration Landscaper's helm deployer reads.
//
// These are not CRDs: they travel inside a DeployItem's spec.config and
// status.providerStatus.
//
// +kubebuilder:object:generate=true
package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// SchemeGroupVersion is the group version of these types.
var SchemeGroupVersion = schema.GroupVersion{Group: "helm.deployer.landscaper.gardener.cloud", Version: "v1alpha1"}

var (
	// SchemeBuilder collects the functions that add these types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &ProviderConfiguration{}, &ProviderStatus{})
		return nil
	})
	// AddToScheme adds these types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// HelmChartRepoCredentialsKey is the key of a Context's configurations that
// holds HelmChartRepoCredentials.
const HelmChartRepoCredentialsKey = "helmChartRepoCredentials"

// +kubebuilder:object:root=true

// ProviderConfiguration is a helm deploy item's spec.config.
type ProviderConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	// Kubeconfig is accepted for compatibility and ignored: the cluster is
	// always the one of the item's Target.
	// +optional
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// UpdateStrategy says how rendered objects are updated when helmDeployment
	// is false (default update).
	// +optional
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty"`
	// ReadinessChecks configures when the deployed objects count as ready.
	// +optional
	ReadinessChecks ReadinessCheckConfiguration `json:"readinessChecks,omitempty"`
	// Chart is the chart to render and deploy.
	Chart Chart `json:"chart"`
	// Name is the release name.
	Name string `json:"name"`
	// Namespace is the release namespace.
	Namespace string `json:"namespace"`
	// CreateNamespace creates the release namespace when it is missing, as
	// helm install --create-namespace does.
	// +optional
	CreateNamespace bool `json:"createNamespace,omitempty"`
	// Values are the chart values (a JSON object).
	// +optional
	Values json.RawMessage `json:"values,omitempty"`
	// ExportsFromManifests is the older form of exports.exports.
	// +optional
	ExportsFromManifests []Export `json:"exportsFromManifests,omitempty"`
	// Exports are values read from the chart values or the deployed objects
	// and written to the item's export Secret (status.exportRef).
	// +optional
	Exports *Exports `json:"exports,omitempty"`
	// ContinuousReconcile, when set, reconciles a finished item periodically.
	// +optional
	ContinuousReconcile *ContinuousReconcileSpec `json:"continuousReconcile,omitempty"`
	// HelmDeployment deploys the chart as a Helm release when true (the
	// default); when false the rendered objects are applied as plain objects.
	// +optional
	HelmDeployment *bool `json:"helmDeployment,omitempty"`
	// HelmDeploymentConfig holds options of the Helm install, upgrade and
	// uninstall operations (only with helmDeployment true).
	// +optional
	HelmDeploymentConfig *HelmDeploymentConfiguration `json:"helmDeploymentConfig,omitempty"`
	// DeletionGroups orders the deletion of the objects (only with
	// helmDeployment false).
	// +optional
	DeletionGroups []DeletionGroupDefinition `json:"deletionGroups,omitempty"`
	// DeletionGroupsDuringUpdate orders the deletion of objects that leave
	// the chart on an update.
	// +optional
	DeletionGroupsDuringUpdate []DeletionGroupDefinition `json:"deletionGroupsDuringUpdate,omitempty"`
}

// IsHelmDeployment reports whether the chart is deployed as a Helm release
// (helmDeployment unset or true).
func (c *ProviderConfiguration) IsHelmDeployment() bool {
	return c.HelmDeployment == nil || *c.HelmDeployment
}

// UpdateStrategy says how existing objects are updated.
type UpdateStrategy string

// Update strategies.
const (
	UpdateStrategyUpdate UpdateStrategy = "update"
	UpdateStrategyPatch  UpdateStrategy = "patch"
)

// Chart names the chart; exactly one source is set.
type Chart struct {
	// Ref is an OCI reference of the chart, e.g. registry.example/charts/app:1.0.0.
	// +optional
	Ref string `json:"ref,omitempty"`
	// FromResource takes the chart from a resource of a component version.
	// +optional
	FromResource *RemoteChartReference `json:"fromResource,omitempty"`
	// Archive is the chart as a .tgz archive, inline or at a URL.
	// +optional
	Archive *ArchiveAccess `json:"archive,omitempty"`
	// HelmChartRepo names a chart in a classic Helm chart repository.
	// +optional
	HelmChartRepo *HelmChartRepo `json:"helmChartRepo,omitempty"`
	// ResourceRef is the key of a blueprint resource holding the chart.
	// +optional
	ResourceRef string `json:"resourceRef,omitempty"`
}

// HelmChartRepo names a chart in a classic Helm chart repository.
type HelmChartRepo struct {
	// HelmChartRepoUrl is the repository's URL (where index.yaml is).
	HelmChartRepoUrl string `json:"helmChartRepoUrl,omitempty"`
	// HelmChartName is the chart's name in the repository index.
	HelmChartName string `json:"helmChartName,omitempty"`
	// HelmChartVersion is the chart's version.
	HelmChartVersion string `json:"helmChartVersion,omitempty"`
}

// RemoteChartReference names a chart resource of a component version.
type RemoteChartReference struct {
	// Reference names the component version in a repository.
	// +optional
	Reference *lsv1alpha1.AnyJSON `json:"ref,omitempty"`
	// Inline is an inline component descriptor.
	// +optional
	Inline *lsv1alpha1.AnyJSON `json:"inline,omitempty"`
	// ResourceName is the name of the chart resource in the component.
	ResourceName string `json:"resourceName"`
}

// ArchiveAccess is a chart as a gzipped tar archive.
type ArchiveAccess struct {
	// Raw is the archive, base64-encoded.
	// +optional
	Raw string `json:"raw,omitempty"`
	// Remote is where to download the archive from.
	// +optional
	Remote *RemoteArchiveAccess `json:"remote,omitempty"`
}

// RemoteArchiveAccess is a chart archive at a URL.
type RemoteArchiveAccess struct {
	// URL of the .tgz archive.
	// +optional
	URL string `json:"url,omitempty"`
}

// HelmDeploymentConfiguration holds options of the Helm operations, by their
// names in Helm's command line (atomic, timeout, force, wait, ...).
type HelmDeploymentConfiguration struct {
	// +optional
	Install map[string]lsv1alpha1.AnyJSON `json:"install,omitempty"`
	// +optional
	Upgrade map[string]lsv1alpha1.AnyJSON `json:"upgrade,omitempty"`
	// +optional
	Uninstall map[string]lsv1alpha1.AnyJSON `json:"uninstall,omitempty"`
}

// ContinuousReconcileSpec says when a finished item is reconciled again.
type ContinuousReconcileSpec struct {
	// Cron is a crontab schedule.
	// +optional
	Cron string `json:"cron,omitempty"`
	// Every is the interval between reconciles (e.g. "5m").
	// +optional
	Every *lsv1alpha1.Duration `json:"every,omitempty"`
}

// HelmChartRepoCredentials are the credentials of classic chart
// repositories, kept in a Context's configurations.
type HelmChartRepoCredentials struct {
	// +optional
	Auths []Auth `json:"auths,omitempty"`
}

// Auth are the credentials of one chart repository.
type Auth struct {
	// URL of the repository the credentials are for.
	URL string `json:"url,omitempty"`
	// CustomCAData is a PEM CA certificate, base64-encoded, for a repository
	// that serves a certificate of its own CA.
	// +optional
	CustomCAData string `json:"customCAData,omitempty"`
	// AuthHeader is the Authorization header value; exactly one of
	// authHeader and secretRef is set.
	// +optional
	AuthHeader string `json:"authHeader,omitempty"`
	// SecretRef names a Secret in the item's namespace holding the header.
	// +optional
	SecretRef *lsv1alpha1.LocalSecretReference `json:"secretRef,omitempty"`
}

// +kubebuilder:object:root=true

// ProviderStatus is a helm deploy item's status.providerStatus.
type ProviderStatus struct {
	metav1.TypeMeta `json:",inline"`
	// ManagedResources are the objects the deployer deployed.
	// +optional
	ManagedResources []ManagedResourceStatus `json:"managedResources,omitempty"`
}

// ManagedResourceStatus is one deployed object.
type ManagedResourceStatus struct {
	// AnnotateBeforeDelete are annotations set before the object is deleted.
	// +optional
	AnnotateBeforeDelete map[string]string `json:"annotateBeforeDelete,omitempty"`
	// Policy the object was applied with.
	// +optional
	Policy string `json:"policy,omitempty"`
	// Resource is the object.
	Resource ObjectReference `json:"resource"`
}

// ObjectReference names a deployed object (the fields of a Kubernetes
// ObjectReference that identify it).
type ObjectReference struct {
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	UID string `json:"uid,omitempty"`
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`
}
