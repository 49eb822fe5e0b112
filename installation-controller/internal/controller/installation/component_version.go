package installation

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/components"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/ocm"
)

// lastError reasons of component versions.
const (
	// ReasonComponentInvalid: spec.componentDescriptor names a component
	// version that cannot be read (missing, refused, not a descriptor).
	ReasonComponentInvalid = "ComponentDescriptorInvalid"
	// ReasonRegistryUnavailable: a registry did not answer; retried.
	ReasonRegistryUnavailable = "RegistryUnavailable"
	// ReasonComponentChanged: the manifest a job started with is neither
	// cached nor in the registry any more.
	ReasonComponentChanged = "ComponentVersionChanged"
)

// componentVersion is an installation's resolved component version and
// what its templates get of it.
type componentVersion struct {
	def        lsv1alpha1.ComponentDescriptorDefinition
	cv         *components.ComponentVersion
	templating *components.Templating
}

// resolveComponent reads the component version spec.componentDescriptor
// names, with the repository context and pull secrets of the installation's
// Context; nil when the installation names none. Every resolution of one
// job reads the digests its first one read (components.Request.Job), so
// Completing renders with the blueprint Init rendered with.
func (r *Reconciler) resolveComponent(ctx context.Context, inst *lsv1alpha1.Installation) (*componentVersion, error) {
	def := inst.Spec.ComponentDescriptor
	if def == nil {
		return nil, nil
	}
	req, err := r.componentRequest(ctx, inst)
	if err != nil {
		return nil, err
	}
	cv, err := r.Components.Resolve(ctx, req)
	var changed *components.ChangedDuringJobError
	if errors.As(err, &changed) {
		return nil, flow.Stalledf(ReasonComponentChanged,
			"spec.componentDescriptor: %v: add the reconcile annotation to the root installation to start a job with the new content", err)
	}
	if err != nil {
		return nil, componentError(ReasonComponentInvalid, "spec.componentDescriptor", err)
	}
	if len(cv.Overwritten) > 0 {
		logf.FromContext(ctx).Info("component versions overwritten", "overwrites", cv.Overwritten)
	}
	t, err := components.NewTemplating(cv)
	if err != nil {
		return nil, flow.StalledError(ReasonComponentInvalid, fmt.Errorf("spec.componentDescriptor: %w", err))
	}
	return &componentVersion{def: *def, cv: cv, templating: t}, nil
}

// componentRequest is what the resolver needs: the definition, and the
// Context's repository context, component version overwrites and registry
// pull secrets.
func (r *Reconciler) componentRequest(ctx context.Context, inst *lsv1alpha1.Installation) (components.Request, error) {
	req := components.Request{Definition: *inst.Spec.ComponentDescriptor,
		Job: components.Job{Installation: string(inst.UID), ID: inst.Status.JobID}}
	c, err := r.contextObject(ctx, inst)
	if err != nil || c == nil {
		return req, err
	}
	req.RepositoryContext = c.RepositoryContext
	if req.Overwrites, err = r.componentOverwrites(ctx, c); err != nil {
		return req, err
	}
	if len(c.RegistryPullSecrets) > 0 {
		req.PullSecrets = make(map[string][]byte, len(c.RegistryPullSecrets))
	}
	for _, ref := range c.RegistryPullSecrets {
		data, err := r.pullSecret(ctx, c, ref.Name)
		if err != nil {
			return req, err
		}
		req.PullSecrets[ref.Name] = data
	}
	return req, nil
}

// contextObject reads the installation's Context; a missing "default"
// Context is nil, any other missing one ends the job.
func (r *Reconciler) contextObject(ctx context.Context, inst *lsv1alpha1.Installation) (*lsv1alpha1.Context, error) {
	name := inst.Spec.Context
	if name == "" {
		name = lsv1alpha1.DefaultContextName
	}
	c := &lsv1alpha1.Context{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: name}, c); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		if name == lsv1alpha1.DefaultContextName {
			return nil, nil
		}
		return nil, flow.Stalledf(ReasonContextNotFound, "Context %s/%s (spec.context) does not exist", inst.Namespace, name)
	}
	return c, nil
}

// pullSecret reads the .dockerconfigjson of one of the Context's
// registryPullSecrets, from the API server (Secrets are not cached).
func (r *Reconciler) pullSecret(ctx context.Context, c *lsv1alpha1.Context, name string) ([]byte, error) {
	where := fmt.Sprintf("Context %s registryPullSecrets: Secret %s/%s", c.Name, c.Namespace, name)
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, flow.Stalledf(ReasonComponentInvalid, "%s does not exist", where)
		}
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	data, ok := sec.Data[corev1.DockerConfigJsonKey]
	if sec.Type != corev1.SecretTypeDockerConfigJson || !ok {
		return nil, flow.Stalledf(ReasonComponentInvalid, "%s is not of type %s with a %s key", where, corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey)
	}
	return data, nil
}

// componentError names the field and sorts err: a registry that did not
// answer is retried, everything else (a missing version or resource,
// refused credentials, content that is not what it should be, a bound)
// ends the job with reason until the user changes something and starts a
// new one.
func componentError(reason, field string, err error) error {
	err = fmt.Errorf("%s: %w", field, err)
	var regErr *ocm.RegistryError
	if errors.As(err, &regErr) && !ocm.IsUnauthorized(err) {
		return flow.TransientError(ReasonRegistryUnavailable, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return flow.StalledError(reason, err)
}
