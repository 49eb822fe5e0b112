package patch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/notes"
)

// Merge is a JSON merge patch of exactly the given document. Unlike
// client.MergeFrom it never includes fields the caller did not name, and a
// nil value removes a key.
type Merge map[string]any

// Type implements client.Patch.
func (p Merge) Type() types.PatchType { return types.MergePatchType }

// Data implements client.Patch.
func (p Merge) Data(client.Object) ([]byte, error) { return json.Marshal(map[string]any(p)) }

// FailItem ends the item's current job as Failed: phase, lastError and
// jobIDFinished = jobID, in one status write guarded by the item's
// resourceVersion, so that a deployer's concurrent write wins (the caller
// sees a conflict and re-evaluates). It is the documented exception to "the
// deployer writes phase": timeouts and interrupts.
func FailItem(ctx context.Context, c client.Client, fieldManager string, item *lsv1alpha1.DeployItem, lastErr lsv1alpha1.Error, now time.Time) error {
	t := metav1.NewTime(now)
	notes.LastError(&lastErr)
	lastErr.LastTransitionTime = t
	lastErr.LastUpdateTime = t
	p := Merge{
		"metadata": map[string]any{"resourceVersion": item.ResourceVersion},
		"status": map[string]any{
			"phase":         lsv1alpha1.PhaseFailed,
			"jobIDFinished": item.Status.JobID,
			"lastError":     lastErr,
		},
	}
	if err := c.Status().Patch(ctx, item, p, client.FieldOwner(fieldManager)); err != nil {
		return fmt.Errorf("failing deploy item %s: %w", item.Name, err)
	}
	return nil
}

// Annotations sets (non-nil value) or removes (nil value) annotations. With a
// non-empty resourceVersion the write only succeeds on that version.
func Annotations(ctx context.Context, c client.Client, fieldManager string, obj client.Object, resourceVersion string, set map[string]*string) error {
	ann := map[string]any{}
	for k, v := range set {
		if v == nil {
			if _, ok := obj.GetAnnotations()[k]; ok {
				ann[k] = nil
			}
			continue
		}
		if cur, ok := obj.GetAnnotations()[k]; !ok || cur != *v {
			ann[k] = *v
		}
	}
	if len(ann) == 0 {
		return nil // nothing would change: no write
	}
	meta := map[string]any{"annotations": ann}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	if err := c.Patch(ctx, obj, Merge{"metadata": meta}, client.FieldOwner(fieldManager)); err != nil {
		return fmt.Errorf("patching annotations of %s: %w", obj.GetName(), err)
	}
	return nil
}
