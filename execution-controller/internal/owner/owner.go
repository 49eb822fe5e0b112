package owner

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// ExecutionKind is the kind of an Execution in an owner reference.
const ExecutionKind = "Execution"

// Execution returns o's controller reference when it names an Execution,
// else nil. Any version of the landscaper.gardener.cloud group counts: an
// owner reference names the object, and the version is only the one its
// writer happened to use (all served versions of a group's kind are one
// resource). A kind of that name in another group is not an Execution.
func Execution(o metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != ExecutionKind {
		return nil
	}
	group, version, ok := strings.Cut(ref.APIVersion, "/")
	if !ok || group != lsv1alpha1.GroupName || version == "" {
		return nil
	}
	return ref
}
