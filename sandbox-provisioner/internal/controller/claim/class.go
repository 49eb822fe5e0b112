package claim

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

func (r *Reconciler) loadClass(ctx context.Context, s *scope) (flow.Result, error) {
	name := s.claim.Spec.DeploymentTargetClassName
	class := &appstudiov1alpha1.DeploymentTargetClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			// The class watch brings the claim back when the class appears.
			note := fmt.Sprintf("DeploymentTargetClass %s does not exist; waiting for it", name)
			if r.warnOnce(s, topicClass, note, nil, EventClassNotFound, note) {
				ctrl.LoggerFrom(ctx).Info("waiting for the claim's class", "class", name)
			}
			return flow.Stop(), nil
		}
		return flow.Continue(), fmt.Errorf("reading DeploymentTargetClass %s: %w", name, err)
	}
	s.class = class
	if p := class.Spec.Provisioner; p != appstudiov1alpha1.SandboxProvisioner {
		// The claim's mark says this provisioner, its class another: the
		// mark is on the claim, which its tenant may write, while the class
		// is the administrator's word. Nothing is provisioned for it (the
		// binder marks it again for the class's provisioner); a class
		// changed back brings the claim back.
		note := fmt.Sprintf("DeploymentTargetClass %s names provisioner %q, not %s; the claim is marked %s=%s, but this provisioner provisions only for classes that name it",
			name, p, appstudiov1alpha1.SandboxProvisioner, appstudiov1alpha1.ProvisionerAnnotation, appstudiov1alpha1.SandboxProvisioner)
		if r.warnOnce(s, topicClass, note, class, EventClassProvisionerMismatch, note) {
			ctrl.LoggerFrom(ctx).Info("the claim's class names another provisioner", "class", name, "provisioner", p)
		}
		return flow.Stop(), nil
	}
	if err := r.parseParameters(class, &s.params); err != nil {
		// The class watch brings the claim back when it is fixed.
		note := fmt.Sprintf("Parameters of DeploymentTargetClass %s are invalid: %v", name, err)
		if r.warnOnce(s, topicClass, note, class, EventInvalidParameters, note) {
			ctrl.LoggerFrom(ctx).Info("invalid class parameters", "class", name, "error", err.Error())
		}
		return flow.Stop(), nil
	}
	// The class is usable: a problem with it that comes back is new.
	r.warnings.clear(client.ObjectKeyFromObject(s.claim), topicClass)
	if s.params.TierName == "" {
		s.params.TierName = r.DefaultTierName
	}
	s.limits = ptr.Deref(s.params.NamespaceLimits, toolchainv1alpha1.NamespaceLimits{}).WithDefaults()
	return flow.Continue(), nil
}

// parseParameters reads the class's parameters into params and checks the
// namespace limits they give (with the defaults filled in).
func (r *Reconciler) parseParameters(class *appstudiov1alpha1.DeploymentTargetClass, params *Parameters) error {
	if class.Spec.Parameters != nil && len(class.Spec.Parameters.Raw) > 0 {
		if err := json.Unmarshal(class.Spec.Parameters.Raw, params); err != nil {
			return err
		}
	}
	limits := ptr.Deref(params.NamespaceLimits, toolchainv1alpha1.NamespaceLimits{}).WithDefaults()
	if err := limits.Validate(); err != nil {
		return fmt.Errorf("namespaceLimits: %w", err)
	}
	return nil
}
