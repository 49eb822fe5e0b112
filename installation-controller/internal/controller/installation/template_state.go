package installation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/kit/flow"
)

// The template state of an installation (blueprint.State) lives in one
// Secret of its namespace: a state may hold what a template generated to
// keep secret (a password, a key). It survives restarts of the controller
// and goes with the installation.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update;delete

const (
	// TemplateStateLabel names (as a label value) the installation whose
	// template state a Secret holds.
	TemplateStateLabel = "installation.terrace.dev/template-state-of"
	// templateStateKey is the Secret key of the state, as JSON.
	templateStateKey = "state"
	// ReasonTemplateStateInvalid: the state cannot be kept (too large, or
	// its Secret's name is taken).
	ReasonTemplateStateInvalid = "TemplateStateInvalid"
)

// TemplateStateSecretName is the name of the Secret holding inst's state.
func TemplateStateSecretName(inst *lsv1alpha1.Installation) string {
	sum := sha256.Sum256([]byte(inst.Name))
	return "template-state-" + hex.EncodeToString(sum[:10])
}

// loadTemplateState reads inst's state: empty when it has none yet, or
// when no execution is to read it (executions is how many).
func (r *Reconciler) loadTemplateState(ctx context.Context, inst *lsv1alpha1.Installation, executions int) (blueprint.State, error) {
	if executions == 0 {
		return blueprint.State{}, nil
	}
	sec, err := r.templateStateSecret(ctx, inst)
	if err != nil || sec == nil {
		return blueprint.State{}, err
	}
	state := blueprint.State{}
	if raw := sec.Data[templateStateKey]; len(raw) > 0 {
		if err := json.Unmarshal(raw, &state); err != nil {
			return nil, flow.Stalledf(ReasonTemplateStateInvalid, "the template state in Secret %s is not JSON: %v (delete the Secret to start from an empty state)", sec.Name, err)
		}
	}
	return state, nil
}

// templateStateSecret reads inst's state Secret, nil when there is none. A
// Secret of that name that is not inst's state is never read or written.
func (r *Reconciler) templateStateSecret(ctx context.Context, inst *lsv1alpha1.Installation) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: inst.Namespace, Name: TemplateStateSecretName(inst)}
	if err := r.APIReader.Get(ctx, key, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the template state Secret %s: %w", key.Name, err)
	}
	if sec.Labels[TemplateStateLabel] != labelValue(inst.Name) {
		return nil, flow.Stalledf(ReasonTemplateStateInvalid, "Secret %s, where this installation keeps its template state, exists and is not labelled %s=%s: rename that Secret",
			sec.Name, TemplateStateLabel, labelValue(inst.Name))
	}
	return sec, nil
}

// saveTemplateState stores prev updated with what the deploy executions
// (deploy true) or the export executions wrote; nothing is written when the
// state did not change. A state over the bound ends the job.
func (r *Reconciler) saveTemplateState(ctx context.Context, inst *lsv1alpha1.Installation, bp *blueprint.Blueprint, prev blueprint.State, deploy bool, written blueprint.State) error {
	next := bp.MergeState(prev, deploy, written)
	if reflect.DeepEqual(next, prev) || (len(next) == 0 && len(prev) == 0) {
		return nil
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return flow.Stalledf(ReasonTemplateStateInvalid, "the template state is not JSON: %v", err)
	}
	if len(raw) > r.Bounds.MaxTemplateStateBytes {
		return flow.Stalledf(ReasonTemplateStateInvalid, "the template state (what the executions render under `state:`, as JSON) is %d bytes, more than %d, the bound of one installation's state (%s)%s",
			len(raw), r.Bounds.MaxTemplateStateBytes, FlagMaxTemplateStateBytes, largestState(next))
	}
	sec, err := r.templateStateSecret(ctx, inst)
	if err != nil {
		return err
	}
	if sec == nil {
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: inst.Namespace, Name: TemplateStateSecretName(inst),
			Labels: map[string]string{TemplateStateLabel: labelValue(inst.Name)}}}
		if err := controllerutil.SetControllerReference(inst, sec, r.Client.Scheme()); err != nil {
			return fmt.Errorf("template state: %w", err)
		}
		sec.Data = map[string][]byte{templateStateKey: raw}
		if err := r.Client.Create(ctx, sec); err != nil {
			return fmt.Errorf("creating the template state Secret %s: %w", sec.Name, err)
		}
		return nil
	}
	sec.Data = map[string][]byte{templateStateKey: raw}
	if err := r.Client.Update(ctx, sec); err != nil {
		return fmt.Errorf("writing the template state Secret %s: %w", sec.Name, err)
	}
	return nil
}

// largestState names the execution with the largest state, the one to
// look at first.
func largestState(state blueprint.State) string {
	name, size := "", 0
	for k, v := range state {
		raw, _ := json.Marshal(v) // the whole state marshalled already
		if len(raw) > size {
			name, size = k, len(raw)
		}
	}
	if name == "" {
		return ""
	}
	return fmt.Sprintf("; the largest is that of execution %s, %d bytes", name, size)
}

// deleteTemplateState deletes inst's state Secret, if it has one.
func (r *Reconciler) deleteTemplateState(ctx context.Context, inst *lsv1alpha1.Installation) error {
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: inst.Namespace, Name: TemplateStateSecretName(inst)}
	if err := r.APIReader.Get(ctx, key, sec); err != nil {
		return client.IgnoreNotFound(err)
	}
	if sec.Labels[TemplateStateLabel] != labelValue(inst.Name) {
		// Not this installation's: never deleted.
		return nil
	}
	if err := r.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the template state Secret %s: %w", sec.Name, err)
	}
	return nil
}
