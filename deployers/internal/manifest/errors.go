package manifest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/text"
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
// cannot fix are configuration problems, the rest is retried. What the
// target said is quoted through targetWords.
func classify(field string, obj *unstructured.Unstructured, op string, err error) error {
	what := fmt.Sprintf("%s: %s %s", field, op, refString(ref(obj)))
	said := targetWords(obj, err)
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case meta.IsNoMatchError(err):
		return lib.ConfigError(ReasonUnknownKind, "%s: the target cluster does not serve this kind: %s", what, said)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsRequestEntityTooLargeError(err):
		return lib.ConfigError(ReasonRejected, "%s: rejected by the target API server: %s", what, said)
	case apierrors.IsForbidden(err):
		return lib.PermanentError(ReasonRejected, fmt.Sprintf("%s: forbidden: %s", what, said), lsv1alpha1.ErrorInsufficientPermission)
	case apierrors.IsUnauthorized(err):
		return lib.PermanentError(ReasonRejected, fmt.Sprintf("%s: unauthorized: %s", what, said), lsv1alpha1.ErrorUnauthorized)
	case errors.As(err, &dnsErr), errors.As(err, &opErr):
		return transient(ReasonUnreachable, what+": target cluster unreachable: "+said, err)
	}
	return transient(ReasonApplyFailed, what+": "+said, err)
}

// transient is a retried error with message, keeping err's chain (the
// library tells a refused address or an oversized response by it).
func transient(reason, message string, err error) *lib.Error {
	e := lib.TransientError(reason, err)
	e.Message = message
	return e
}

// targetWords is what an error message quotes of err, the answer of a target
// cluster about obj. For a Secret, the API server's own words are never
// quoted: an admission webhook may echo the request, a field's invalid value
// may be quoted, a response that fails to decode is quoted whole, and each
// would copy the Secret's data into the item's status, its Events and the
// status of every installation above it. What is said instead: the status
// reason and code, the object and the fields the server named (keys, not
// values), or only the kind of failure.
func targetWords(obj *unstructured.Unstructured, err error) string {
	if !isSecret(obj) || transportLevel(err) {
		return err.Error()
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return fmt.Sprintf("the answer could not be used (%T); it is not quoted, as it may contain the Secret's data", err)
	}
	status := st.Status()
	out := fmt.Sprintf("%s (%d); the API server's message is not quoted, as it may contain the Secret's data", status.Reason, status.Code)
	if d := status.Details; d != nil {
		if d.Kind != "" || d.Name != "" {
			out += fmt.Sprintf("; about %s", text.Shorten(strings.TrimSpace(d.Kind+" "+d.Name), maxQuotedField))
		}
		var fields []string
		for _, c := range d.Causes {
			if c.Field != "" {
				fields = append(fields, text.Shorten(c.Field, maxQuotedField))
			}
		}
		if len(fields) > 0 {
			out += "; fields: " + strings.Join(fields, ", ")
		}
	}
	return out
}

// maxQuotedField bounds a field path or object name quoted from a target's
// answer about a Secret.
const maxQuotedField = 128

// transportLevel: err is about the connection (refused address, timeout,
// oversized response, network), not the server's answer, and quotes no body.
func transportLevel(err error) bool {
	var (
		urlErr   *url.Error
		opErr    *net.OpError
		refused  *lib.AddressRefusedError
		tooLarge *lib.ResponseTooLargeError
	)
	return errors.As(err, &urlErr) || errors.As(err, &opErr) || errors.As(err, &refused) || errors.As(err, &tooLarge) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// isSecret: obj is a core Secret.
func isSecret(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Secret"
}
