package manifest

import (
	"errors"
	"fmt"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// Reasons of the manifest deployer's errors.
const (
	ReasonApplyFailed      = "ApplyFailed"
	ReasonRejected         = "ManifestRejected"
	ReasonUnknownKind      = "UnknownKind"
	ReasonUnreachable      = "TargetUnreachable"
	ReasonDeleteFailed     = "DeleteFailed"
	ReasonNotReady         = "ReadinessTimeout"
	ReasonExportFailed     = "ExportFailed"
	ReasonReadinessInvalid = "InvalidReadinessCheck"
)

// classify turns an API error into a lastError: refusals that retrying
// cannot fix are configuration problems, the rest is retried.
func classify(field string, obj *unstructured.Unstructured, op string, err error) error {
	what := fmt.Sprintf("%s: %s %s", field, op, refString(ref(obj)))
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case meta.IsNoMatchError(err):
		return lib.ConfigError(ReasonUnknownKind, "%s: the target cluster does not serve this kind: %v", what, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsRequestEntityTooLargeError(err):
		return lib.ConfigError(ReasonRejected, "%s: rejected by the target API server: %v", what, err)
	case apierrors.IsForbidden(err):
		return lib.PermanentError(ReasonRejected, fmt.Sprintf("%s: forbidden: %v", what, err), lsv1alpha1.ErrorInsufficientPermission)
	case apierrors.IsUnauthorized(err):
		return lib.PermanentError(ReasonRejected, fmt.Sprintf("%s: unauthorized: %v", what, err), lsv1alpha1.ErrorUnauthorized)
	case errors.As(err, &dnsErr), errors.As(err, &opErr):
		return lib.TransientError(ReasonUnreachable, fmt.Errorf("%s: target cluster unreachable: %w", what, err))
	}
	return lib.TransientError(ReasonApplyFailed, fmt.Errorf("%s: %w", what, err))
}
