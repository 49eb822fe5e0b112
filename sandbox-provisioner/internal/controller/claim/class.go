package claim

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
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
	if class.Spec.Parameters != nil && len(class.Spec.Parameters.Raw) > 0 {
		if err := json.Unmarshal(class.Spec.Parameters.Raw, &s.params); err != nil {
			// The class watch brings the claim back when it is fixed.
			note := fmt.Sprintf("Parameters of DeploymentTargetClass %s are invalid: %v", name, err)
			if r.warnOnce(s, topicClass, note, class, EventInvalidParameters, note) {
				ctrl.LoggerFrom(ctx).Info("invalid class parameters", "class", name, "error", err.Error())
			}
			return flow.Stop(), nil
		}
	}
	// The class is usable: a problem with it that comes back is new.
	r.warnings.clear(client.ObjectKeyFromObject(s.claim), topicClass)
	if s.params.TierName == "" {
		s.params.TierName = r.DefaultTierName
	}
	return flow.Continue(), nil
}
