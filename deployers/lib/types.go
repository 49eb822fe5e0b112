package lib

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib/extension"
	"github.com/terrace-dev/terrace/kit/timeout"
)

// Deployer is what a concrete deployer implements. The library calls exactly
// one of Abort, ForceReconcile, Delete or Reconcile per reconcile, after the
// contract steps, and writes the outcome into the item's status.
//
// The methods may set req.Item.Status.ProviderStatus and
// req.Item.Status.ExportReference; every other status field is the library's.
// They must not block for long: to wait (readiness, a delay) return
// Result{Pending: true, RequeueAfter: d}.
type Deployer interface {
	// Reconcile applies the item.
	Reconcile(ctx context.Context, req *Request) (Result, error)
	// Delete removes what the item installed. It is not called when the item
	// carries delete-without-uninstall: "true".
	Delete(ctx context.Context, req *Request) (Result, error)
	// Abort stops work on the item gracefully; the item then ends Failed.
	Abort(ctx context.Context, req *Request) (Result, error)
	// ForceReconcile applies the item even if nothing changed.
	ForceReconcile(ctx context.Context, req *Request) (Result, error)
	// ExtensionHooks returns the registered extension hooks (may be nil).
	ExtensionHooks() extension.ReconcileExtensionHooks
}

// UninstallChecker is optionally implemented by a Deployer. When the item's
// Target or Context is missing or unusable, its deletion cannot call Delete;
// if NothingToUninstall reports true, the library removes the finalizer
// anyway (and the item's export Secret), since there is nothing to remove
// from the target. A Deployer that does not implement it is taken to have
// installed nothing while status.providerStatus is empty: a deployer that
// installs without recording it there must implement UninstallChecker.
type UninstallChecker interface {
	// NothingToUninstall reports whether the item has nothing installed on
	// its target. It must not block or make requests.
	NothingToUninstall(di *lsv1alpha1.DeployItem) bool
}

// Request is one call into a Deployer.
type Request struct {
	// Item is the deploy item (a private copy).
	Item *lsv1alpha1.DeployItem
	// Target is the item's Target, or nil when it names none.
	Target *lsv1alpha1.Target
	// Deadline is when the current job times out (zero: never). Deployers that
	// wait (e.g. for readiness) wait at most until then.
	Deadline time.Time
	// Forced is true when a ShouldReconcile hook forced the reconcile of an
	// item that had already finished its job (e.g. periodic re-apply).
	Forced bool
	// Log carries the item's key/values.
	Log logr.Logger
}

// Result is the outcome of a successful Deployer call.
type Result struct {
	// Pending means the work is not finished (e.g. waiting for readiness): the
	// item stays Progressing (Deleting) and is reconciled again after
	// RequeueAfter, or on its next change when RequeueAfter is zero.
	Pending bool
	// RequeueAfter asks for another reconcile after this duration.
	RequeueAfter time.Duration
	// Message describes the state in Events and the Ready condition.
	Message string
}

// Done is the Result of finished work.
func Done() Result { return Result{} }

// PendingFor is the Result of unfinished work, looked at again after d.
func PendingFor(d time.Duration, message string) Result {
	return Result{Pending: true, RequeueAfter: d, Message: message}
}

// TargetSelector selects the Targets a deployer serves, by the Target's
// annotations and labels (Kubernetes label-selector syntax, e.g.
// "landscaper.gardener.cloud/environment=prod" or
// "!landscaper.gardener.cloud/environment"). A nil selector matches
// everything. A deployer serves only items whose Target matches; an item
// without a Target, or whose Target is missing or in another namespace, is
// treated as having a Target without annotations and labels, so that the
// deployer of the default environment reports the problem.
type TargetSelector struct {
	Annotations labels.Selector
	Labels      labels.Selector
}

// ParseTargetSelector parses the selector strings; empty strings select everything.
func ParseTargetSelector(annotations, labelSelector string) (TargetSelector, error) {
	var s TargetSelector
	var err error
	if strings.TrimSpace(annotations) != "" {
		if s.Annotations, err = labels.Parse(annotations); err != nil {
			return s, fmt.Errorf("target annotation selector %q: %w", annotations, err)
		}
	}
	if strings.TrimSpace(labelSelector) != "" {
		if s.Labels, err = labels.Parse(labelSelector); err != nil {
			return s, fmt.Errorf("target label selector %q: %w", labelSelector, err)
		}
	}
	return s, nil
}

// Empty reports whether the selector matches every Target (and items without one).
func (s TargetSelector) Empty() bool {
	return (s.Annotations == nil || s.Annotations.Empty()) && (s.Labels == nil || s.Labels.Empty())
}

// Matches reports whether t is selected.
func (s TargetSelector) Matches(t *lsv1alpha1.Target) bool {
	if s.Annotations != nil && !s.Annotations.Matches(labels.Set(t.GetAnnotations())) {
		return false
	}
	if s.Labels != nil && !s.Labels.Matches(labels.Set(t.GetLabels())) {
		return false
	}
	return true
}

// String renders the selector for logs.
func (s TargetSelector) String() string {
	var parts []string
	if s.Annotations != nil && !s.Annotations.Empty() {
		parts = append(parts, "annotations: "+s.Annotations.String())
	}
	if s.Labels != nil && !s.Labels.Empty() {
		parts = append(parts, "labels: "+s.Labels.String())
	}
	return strings.Join(parts, "; ")
}

// DefaultTimeout is the job timeout when an item sets no spec.timeout.
const DefaultTimeout = 10 * time.Minute

// Options configure a Reconciler.
type Options struct {
	// Type is the spec.type served, e.g. landscaper.gardener.cloud/mock. Required.
	Type string
	// Name is the deployer's name: status.deployer.name, the controller name,
	// the field manager and the Event source. Required. Two deployers in one
	// manager need distinct names.
	Name string
	// Identity tells deployers of one type apart (status.deployer.identity);
	// default Name.
	Identity string
	// Version goes into status.deployer.version.
	Version string
	// TargetSelector restricts the Targets served (default: all, including
	// items without a Target).
	TargetSelector TargetSelector
	// TargetType, when set, is the only Target type the deployer accepts; a
	// Target of another type fails the item with ERR_CONFIGURATION_PROBLEM.
	TargetType string
	// DefaultTimeout bounds a job whose item sets no spec.timeout (zero
	// value: 10m; timeout.Disabled(): no bound). The deployer binaries set it
	// from --default-timeout, the counterpart of the execution controller's
	// --progressing-timeout.
	DefaultTimeout timeout.Timeout
	// CallTimeout bounds each call of the Deployer's methods (default
	// DefaultCallTimeout; the binaries' --call-timeout): a call that runs
	// longer is cancelled and retried as a transient error.
	CallTimeout time.Duration
	// Namespaces restricts the deploy items watched to these namespaces
	// (default: all). The deployer runs its own item informer, so a
	// namespace restriction of the manager's cache does not reach it; tests
	// that run one manager per namespace set this.
	Namespaces []string
}

func (o *Options) setDefaults() {
	if o.Identity == "" {
		o.Identity = o.Name
	}
	if o.DefaultTimeout == (timeout.Timeout{}) {
		o.DefaultTimeout = timeout.After(DefaultTimeout)
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
}

func (o Options) validate() error {
	var missing []string
	if o.Type == "" {
		missing = append(missing, "Type")
	}
	if o.Name == "" {
		missing = append(missing, "Name")
	}
	if len(missing) > 0 {
		return fmt.Errorf("deployer options: %s must be set", strings.Join(missing, ", "))
	}
	return nil
}
