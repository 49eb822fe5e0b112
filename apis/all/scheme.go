// Package all registers every Terrace API group with a scheme in one call.
package all

import (
	"k8s.io/apimachinery/pkg/runtime"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	manifestv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha1"
	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
)

var schemeBuilder = runtime.NewSchemeBuilder(
	lsv1alpha1.AddToScheme,
	appstudiov1alpha1.AddToScheme,
	toolchainv1alpha1.AddToScheme,
	manifestv1alpha1.AddToScheme,
	manifestv1alpha2.AddToScheme,
	mockv1alpha1.AddToScheme,
)

// AddToScheme adds the CRD groups and the deployers' provider-config types.
var AddToScheme = schemeBuilder.AddToScheme
