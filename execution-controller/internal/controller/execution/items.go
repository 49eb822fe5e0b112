package execution

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/csaupgrade"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/controller/timeouts"
	"github.com/terrace-dev/terrace/execution-controller/internal/depgraph"
	"github.com/terrace-dev/terrace/execution-controller/internal/owner"
	"github.com/terrace-dev/terrace/execution-controller/internal/patch"
	"github.com/terrace-dev/terrace/kit/jobid"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// OwnerIndex is the field index of deploy items by the name of the
// Execution that controls them, so an execution lists its items from the
// cache without a label scan.
const OwnerIndex = "terrace.dev/execution"

// ItemNameIndex is the field index of executions by the object names of the
// deploy items their spec maps to ("<exec>-<item>", see ItemObjectName), so
// the events of a deploy item that holds such a name for someone else (a
// namesake the execution waits for, see namesakeWait) reach that execution
// from the cache, without an API request.
const ItemNameIndex = "terrace.dev/deploy-item-name"

// ExportsNameIndex is the field index of executions by the name of their
// exports DataObject (see ExportsObjectName; a shortened name cannot be
// mapped back), so the events of a DataObject of that name held by someone
// else (one being deleted the execution waits for, see namesakeWait) reach
// that execution from the cache, without an API request.
const ExportsNameIndex = "terrace.dev/exports-name"

func indexExportsName(o client.Object) []string {
	exec, ok := o.(*lsv1alpha1.Execution)
	if !ok {
		return nil
	}
	return []string{ExportsObjectName(exec.Name)}
}

func indexItemNames(o client.Object) []string {
	exec, ok := o.(*lsv1alpha1.Execution)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(exec.Spec.DeployItems))
	for _, t := range exec.Spec.DeployItems {
		out = append(out, ItemObjectName(exec.Name, t.Name))
	}
	return out
}

// indexOwner indexes a deploy item by the name of the Execution controlling
// it (owner.Execution: the rule the timeouts reconciler uses, too).
func indexOwner(o client.Object) []string {
	ref := owner.Execution(o)
	if ref == nil {
		return nil
	}
	return []string{ref.Name}
}

// ItemObjectName is the deterministic name of the DeployItem for item of
// execution exec: "<exec>-<item>". Deterministic names make creation
// idempotent, so a restarted controller never creates an item twice. Names
// that would exceed the 253-character limit are shortened with a hash.
func ItemObjectName(exec, item string) string {
	return shorten(exec+"-"+item, validation.DNS1123SubdomainMaxLength)
}

// ExportsObjectName is the name of the DataObject holding exec's exports.
func ExportsObjectName(exec string) string {
	return shorten(exec+"-exports", validation.DNS1123SubdomainMaxLength)
}

// ManagedByValue is the value of the managed-by label for exec: its name when
// that is a valid label value, otherwise a shortened form with a hash.
func ManagedByValue(exec string) string {
	if len(validation.IsValidLabelValue(exec)) == 0 {
		return exec
	}
	return strings.Trim(shorten(exec, validation.LabelValueMaxLength), ".-_")
}

func shorten(s string, maxLen int) string {
	if len(s) <= maxLen {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:10]
	return strings.TrimRight(s[:maxLen-11], ".-") + "-" + h
}

// itemName returns the name of an item inside its execution.
func itemName(di *lsv1alpha1.DeployItem) string {
	if n := di.Labels[lsv1alpha1.ExecutionItemNameLabel]; n != "" {
		return n
	}
	// Someone removed the label: the object name still identifies it (and it
	// can never clash with a valid item name, which has no '/').
	return "object/" + di.Name
}

// itemDependsOn reads the dependencies recorded on an item, which is all
// that is left of an orphan's position in the graph once it left the spec.
func itemDependsOn(di *lsv1alpha1.DeployItem) []string {
	v := di.Annotations[lsv1alpha1.DependsOnAnnotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// specGraph is the dependency graph of the execution's spec.
func specGraph(exec *lsv1alpha1.Execution) depgraph.Graph {
	g := depgraph.Graph{}
	for _, t := range exec.Spec.DeployItems {
		g[t.Name] = t.DependsOn
	}
	return g
}

// specItemRefs are the references of the spec's items, sorted by item name:
// what a job records in status.deployItemRefs when it starts, as its item set.
func specItemRefs(exec *lsv1alpha1.Execution) []lsv1alpha1.NamedObjectReference {
	refs := make([]lsv1alpha1.NamedObjectReference, 0, len(exec.Spec.DeployItems))
	for _, t := range exec.Spec.DeployItems {
		refs = append(refs, lsv1alpha1.NamedObjectReference{Name: t.Name, Reference: lsv1alpha1.ObjectReference{
			Name: ItemObjectName(exec.Name, t.Name), Namespace: exec.Namespace,
		}})
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Name < refs[j].Name })
	return refs
}

// jobItems is the item set of the running (or last) install job, by item
// name: status.deployItemRefs, recorded from the spec when the job started.
// Items added to the spec since wait for the next job; items removed since
// are still the job's (see jobGraph).
func jobItems(exec *lsv1alpha1.Execution) map[string]bool {
	out := make(map[string]bool, len(exec.Status.DeployItemReferences))
	for _, ref := range exec.Status.DeployItemReferences {
		out[ref.Name] = true
	}
	return out
}

// template returns the spec entry named name, or nil.
func template(exec *lsv1alpha1.Execution, name string) *lsv1alpha1.DeployItemTemplate {
	for i := range exec.Spec.DeployItems {
		if exec.Spec.DeployItems[i].Name == name {
			return &exec.Spec.DeployItems[i]
		}
	}
	return nil
}

// jobGraph is the dependency graph of the running job's item set. An item's
// dependencies are the ones it was created or updated with when the job
// started (its depends-on annotation: no item is updated mid-job), so an
// edit of dependsOn mid-job waits for the next job like any other edit. An
// item of the set that does not exist (deleted by hand mid-job, or never
// created) takes its dependencies from its spec entry, from which it is
// (re)created; one whose spec entry is gone too cannot be created: it is
// dropped from the job (returned in dropped), and an item depending on it
// cannot start in this job (see progress).
func jobGraph(s *scope) (g depgraph.Graph, dropped []string) {
	g = depgraph.Graph{}
	for _, ref := range s.exec.Status.DeployItemReferences {
		n := ref.Name
		if di := s.items[n]; di != nil {
			g[n] = itemDependsOn(di)
		} else if t := template(s.exec, n); t != nil {
			g[n] = t.DependsOn
		} else {
			dropped = append(dropped, n)
		}
	}
	return g, dropped
}

// loadItems reads the execution's items from the cache.
func (r *Reconciler) loadItems(ctx context.Context, s *scope) (ctrl.Result, error) {
	list := &lsv1alpha1.DeployItemList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.exec.Namespace), client.MatchingFields{OwnerIndex: s.exec.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing deploy items: %w", err)
	}
	s.items = map[string]*lsv1alpha1.DeployItem{}
	for i := range list.Items {
		di := &list.Items[i]
		if ref := metav1.GetControllerOf(di); ref == nil || ref.UID != s.exec.UID {
			continue // a namesake from an earlier execution of that name
		}
		s.items[itemName(di)] = di
	}
	return ctrl.Result{}, nil
}

// desiredItem is the apply body of the DeployItem for template t: spec,
// labels, the depends-on annotation and the controller reference. It never
// names status or the deployer's finalizer; syncItems adds the reconcile-time
// annotation to the create of an item handed its job at once.
func desiredItem(exec *lsv1alpha1.Execution, t *lsv1alpha1.DeployItemTemplate) (*unstructured.Unstructured, error) {
	labels := map[string]any{}
	for k, v := range desiredLabels(exec, t) {
		labels[k] = v
	}
	meta := map[string]any{
		"name":      ItemObjectName(exec.Name, t.Name),
		"namespace": exec.Namespace,
		"labels":    labels,
		"ownerReferences": []any{map[string]any{
			"apiVersion":         lsv1alpha1.SchemeGroupVersion.String(),
			"kind":               "Execution",
			"name":               exec.Name,
			"uid":                string(exec.UID),
			"controller":         true,
			"blockOwnerDeletion": true,
		}},
	}
	if len(t.DependsOn) > 0 {
		deps := slices.Clone(t.DependsOn)
		sort.Strings(deps)
		meta["annotations"] = map[string]any{lsv1alpha1.DependsOnAnnotation: strings.Join(deps, ",")}
	}
	spec := lsv1alpha1.DeployItemSpec{
		Type:    t.Type,
		Target:  t.Target,
		Context: exec.Spec.Context,
		Timeout: t.Timeout,
	}
	if len(t.Config.Raw) > 0 {
		spec.Config = t.Config.DeepCopy()
	}
	specMap, err := toMap(spec)
	if err != nil {
		return nil, fmt.Errorf("item %s: %w", t.Name, err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": lsv1alpha1.SchemeGroupVersion.String(),
		"kind":       "DeployItem",
		"metadata":   meta,
		"spec":       specMap,
	}}, nil
}

// desiredLabels are the labels desiredItem gives the item of template t.
func desiredLabels(exec *lsv1alpha1.Execution, t *lsv1alpha1.DeployItemTemplate) map[string]string {
	out := make(map[string]string, len(t.Labels)+2)
	for k, v := range t.Labels {
		out[k] = v
	}
	out[lsv1alpha1.ManagedByExecutionLabel] = ManagedByValue(exec.Name)
	out[lsv1alpha1.ExecutionItemNameLabel] = t.Name
	return out
}

// extraLabels are the keys of the labels cur carries that desiredItem would
// not set: labels of other managers or users, or labels this controller set
// from an earlier template that dropped them. Which one only the item's
// managedFields tell (the cache strips them): see ownsAnyLabel.
func extraLabels(exec *lsv1alpha1.Execution, t *lsv1alpha1.DeployItemTemplate, cur *lsv1alpha1.DeployItem) []string {
	want := desiredLabels(exec, t)
	var out []string
	for k := range cur.Labels {
		if _, ok := want[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// ownsAnyLabel reports whether manager owns one of the labels keys of di (a
// live copy: managedFields) through any of its managedFields entries on the
// main resource: the item's create or an apply of this controller.
func ownsAnyLabel(di *lsv1alpha1.DeployItem, manager string, keys []string) bool {
	for _, mf := range di.ManagedFields {
		if mf.Manager != manager || mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Labels map[string]json.RawMessage `json:"f:labels"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		for _, k := range keys {
			if _, ok := fields.Metadata.Labels["f:"+k]; ok {
				return true
			}
		}
	}
	return false
}

// upToDate reports whether cur already matches what desiredItem would apply,
// so that an unchanged item costs no API request. Labels cur carries beyond
// the desired ones are not looked at here (see extraLabels).
func upToDate(exec *lsv1alpha1.Execution, t *lsv1alpha1.DeployItemTemplate, cur *lsv1alpha1.DeployItem) bool {
	if cur == nil {
		return false
	}
	if ref := metav1.GetControllerOf(cur); ref == nil || ref.UID != exec.UID {
		return false
	}
	for k, v := range desiredLabels(exec, t) {
		if l, ok := cur.Labels[k]; !ok || l != v {
			return false
		}
	}
	deps := slices.Clone(t.DependsOn)
	sort.Strings(deps)
	if cur.Annotations[lsv1alpha1.DependsOnAnnotation] != strings.Join(deps, ",") {
		return false
	}
	if cur.Spec.Type != t.Type || cur.Spec.Context != exec.Spec.Context ||
		!equality.Semantic.DeepEqual(cur.Spec.Target, t.Target) ||
		!equality.Semantic.DeepEqual(cur.Spec.Timeout, t.Timeout) {
		return false
	}
	return sameJSON(cur.Spec.Config, &t.Config)
}

func sameJSON(a, b *runtime.RawExtension) bool {
	var av, bv any
	if a != nil && len(a.Raw) > 0 {
		if json.Unmarshal(a.Raw, &av) != nil {
			return false
		}
	}
	if b != nil && len(b.Raw) > 0 {
		if json.Unmarshal(b.Raw, &bv) != nil {
			return false
		}
	}
	return equality.Semantic.DeepEqual(av, bv)
}

// syncItems creates or updates the DeployItem of every spec entry of the
// job's item set (status.deployItemRefs). With createOnly, existing items
// are left alone (spec changes are applied at the start of the next job, not
// in the middle of one). An entry added to the spec mid-job is not the job's:
// it is created by the next job. An item of the job whose entry left the
// spec is neither updated nor (if missing) created.
//
// A write the API server refuses for good (a namesake the execution does not
// control, a template it rejects) is returned as a configProblem: the job
// fails with it instead of retrying for ever. A name held by a namesake on its
// way out is returned as a namesakeWait: the job waits (see waitForName).
func (r *Reconciler) syncItems(ctx context.Context, s *scope, createOnly bool) error {
	log := logf.FromContext(ctx)
	orphansLeft := len(orphansOf(s)) > 0
	inJob := jobItems(s.exec)
	for i := range s.exec.Spec.DeployItems {
		t := &s.exec.Spec.DeployItems[i]
		if !inJob[t.Name] {
			log.V(1).Info("deploy item added to the spec mid-job waits for the next job", "item", t.Name)
			continue
		}
		cur := s.items[t.Name]
		if cur == nil {
			// A new item without dependencies, created when a job starts and
			// no orphan's deletion holds the job up, is handed the job in this
			// very reconcile: its create carries the reconcile-time stamp, so
			// the hand-over needs no annotation patch of its own (handOver).
			// (A stamp on an item that then waits would start its pickup
			// timeout before it has a job.)
			stamp := !createOnly && len(t.DependsOn) == 0 && !orphansLeft
			created, err := r.createItem(ctx, s, t, stamp)
			if err != nil {
				return r.unstampOnProblem(ctx, s, err)
			}
			if created {
				continue
			}
			// It existed after all and is this execution's (the cache lags):
			// carry on as for an existing item.
			cur = s.items[t.Name]
		}
		if createOnly {
			continue
		}
		// An item whose fields match may still carry a label an earlier
		// template had and this one dropped: it goes with the update, but
		// only when this controller owns it (a user's or another manager's
		// label stays, and costs no write). Which it is only a live read
		// tells: a rare path (labels no template sets are rare), taken once
		// per item and set of such labels (see foreignLabels).
		onlyLabels := upToDate(s.exec, t, cur)
		var extra []string
		if onlyLabels {
			if extra = extraLabels(s.exec, t, cur); len(extra) == 0 {
				continue
			}
		}
		if err := r.updateItem(ctx, s, t, cur, extra); err != nil {
			return r.unstampOnProblem(ctx, s, err)
		}
	}
	nameFree(s, ReasonDeployItemNameTaken)
	return nil
}

// namesakeWait is what a write returns when the name of the object it is to
// write is held by a namesake on its way out: a deploy item (createItem,
// ReasonDeployItemNameTaken) or the exports DataObject (gatherExports,
// ReasonDataObjectNameTaken). It is no failure and no error either: the job
// merely waits, and an error would be retried with back-off and logged as a
// failed reconcile on every retry. It travels up as an error value only so
// that the phase stops at it (as at a configProblem); runJob turns it into a
// normal result (waitForName).
type namesakeWait struct {
	// reason is the Progressing condition's reason meanwhile, and the
	// Warning event's; action is the event's action.
	reason, action string
	// logMsg is the log line's message (fixed per reason, so the line can be
	// searched for); msg says which object waits for which.
	logMsg, msg string
}

func (w namesakeWait) Error() string { return w.msg }

// deployItemNameTaken: a deploy item's name is held by a namesake on its way out.
func deployItemNameTaken(msg string) namesakeWait {
	return namesakeWait{reason: ReasonDeployItemNameTaken, action: "CreateDeployItem",
		logMsg: "waiting for a namesake deploy item to go", msg: msg}
}

// dataObjectNameTaken: the exports DataObject's name is held by a namesake
// being deleted.
func dataObjectNameTaken(msg string) namesakeWait {
	return namesakeWait{reason: ReasonDataObjectNameTaken, action: "WriteExports",
		logMsg: "waiting for a namesake exports DataObject to go", msg: msg}
}

// nameWait separates a namesakeWait outcome from the real errors: it returns
// the wait, or err (nil for a wait).
func nameWait(err error) (*namesakeWait, error) {
	var w namesakeWait
	if errors.As(err, &w) {
		return &w, nil
	}
	return nil, err
}

// DefaultNameRecheck is the default of Reconciler.NameRecheck.
const DefaultNameRecheck = time.Minute

func (r *Reconciler) nameRecheck() time.Duration {
	if r.NameRecheck > 0 {
		return r.NameRecheck
	}
	return DefaultNameRecheck
}

// waitForName is the result of a reconcile whose job waits for a namesake to
// go (w): it records that in the running job's Progressing condition (reason
// w.reason, still True), with a Warning event and an info log line when that
// is news (nameFree restores the condition once the name is free). The
// namesake's events wake the execution (its controller's watch, or
// namesakeWaiters); the requeue after NameRecheck is only a safety net should
// one be missed.
func (r *Reconciler) waitForName(ctx context.Context, s *scope, w *namesakeWait) ctrl.Result {
	log := logf.FromContext(ctx)
	res := ctrl.Result{RequeueAfter: r.nameRecheck()}
	st := &s.exec.Status
	c := meta.FindStatusCondition(st.Conditions, ConditionProgressing)
	if c == nil || c.Status != metav1.ConditionTrue {
		// No job start recorded: nothing to say it on.
		log.V(1).Info(w.logMsg, "message", w.msg)
		return res
	}
	if c.Reason == w.reason && c.Message == w.msg {
		log.V(1).Info("still "+w.logMsg, "message", w.msg)
		return res
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: ConditionProgressing, Status: metav1.ConditionTrue, Reason: w.reason, Message: w.msg,
		ObservedGeneration: st.ObservedGeneration,
	})
	// Once written, like every event: not repeated on each reconcile.
	s.afterStatus = append(s.afterStatus, func(ctx context.Context) error {
		logf.FromContext(ctx).Info(w.logMsg, "message", w.msg)
		r.Recorder.Eventf(s.exec, nil, corev1.EventTypeWarning, w.reason, w.action, "%s", w.msg)
		return nil
	})
	return res
}

// nameFree restores the job's Progressing condition that waitForName changed
// for a wait of reason once that name is free.
func nameFree(s *scope, reason string) {
	st := &s.exec.Status
	if c := meta.FindStatusCondition(st.Conditions, ConditionProgressing); c == nil || c.Reason != reason {
		return
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: ConditionProgressing, Status: metav1.ConditionTrue, Reason: ReasonJobStarted,
		Message: "job " + st.JobID + " started", ObservedGeneration: st.ObservedGeneration,
	})
}

// configProblem is a write the API server refuses and retrying cannot fix
// (or an object this execution must not touch): the job fails with it, with
// lastError.reason reason and code ERR_CONFIGURATION_PROBLEM.
type configProblem struct {
	reason string
	error
}

func (e configProblem) Unwrap() error { return e.error }

// ReasonDeployItemNameConflict: the DeployItem an item maps to exists and is
// controlled by someone else (another execution, or nothing: a user's own).
// ReasonDeployItemInvalid: the API server rejects the item as the template
// describes it. ReasonDataObjectNameConflict: the exports DataObject exists
// and is controlled by someone else.
// ReasonDeployItemNameTaken: the job waits for such a namesake that is on
// its way out (being deleted, or of an earlier execution of the same name)
// to go (the Progressing condition's reason meanwhile, and a Warning event).
// ReasonDataObjectNameTaken: the same for the exports DataObject: the job
// waits for a namesake being deleted to go, to write its exports anew.
const (
	ReasonDeployItemNameConflict = "DeployItemNameConflict"
	ReasonDeployItemNameTaken    = "DeployItemNameTaken"
	ReasonDeployItemInvalid      = "DeployItemInvalid"
	ReasonDataObjectNameConflict = "DataObjectNameConflict"
	ReasonDataObjectNameTaken    = "DataObjectNameTaken"
)

// unstampOnProblem removes the reconcile-time stamp from the items this
// reconcile created stamped when the job fails with a configProblem, or waits
// for a namesake to go (namesakeWait), before they were handed the job: they will
// not get it (or not now: the hand-over stamps them again), and a stamp left
// behind would fail them with a false PickupTimeout later. Other errors are
// returned as they are (the reconcile is retried and hands the job over).
func (r *Reconciler) unstampOnProblem(ctx context.Context, s *scope, err error) error {
	var problem configProblem
	var wait namesakeWait
	if !errors.As(err, &problem) && !errors.As(err, &wait) {
		return err
	}
	for _, n := range s.stamped {
		di := s.items[n]
		if di == nil {
			continue
		}
		if uerr := patch.Annotations(ctx, r.Client, r.FieldManager, di, "",
			map[string]*string{lsv1alpha1.ReconcileTimeAnnotation: nil}); client.IgnoreNotFound(uerr) != nil {
			return uerr
		}
	}
	s.stamped = nil
	return err
}

// controllerName describes o's controller for messages: "Kind name (uid)",
// or "nothing".
func controllerName(o client.Object) string {
	ref := metav1.GetControllerOf(o)
	if ref == nil {
		return "nothing (no controller reference)"
	}
	return fmt.Sprintf("%s %s (%s, uid %s)", ref.Kind, ref.Name, ref.APIVersion, ref.UID)
}

// createItem creates the item of template t, which the execution's cache
// shows no item of its own for. It is a create, not an apply: a namesake
// (another execution's item "<exec>-<item>" that maps to the same name, or a
// user's own DeployItem) must never be taken over. With stamp, the create
// carries the reconcile-time stamp (see syncItems). It reports false when
// the item existed and is this execution's after all (a lagging cache; the
// live copy is in s.items then, and is left as it is).
func (r *Reconciler) createItem(ctx context.Context, s *scope, t *lsv1alpha1.DeployItemTemplate, stamp bool) (bool, error) {
	log := logf.FromContext(ctx)
	u, err := desiredItem(s.exec, t)
	if err != nil {
		return false, err
	}
	if stamp {
		_ = unstructured.SetNestedField(u.Object, r.Now().UTC().Format(ReconcileTimeFormat),
			"metadata", "annotations", lsv1alpha1.ReconcileTimeAnnotation)
	}
	name := u.GetName()
	err = r.Client.Create(ctx, u, client.FieldOwner(r.FieldManager))
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err):
		live := &lsv1alpha1.DeployItem{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.exec.Namespace, Name: name}, live); err != nil {
			return false, fmt.Errorf("reading existing deploy item %s: %w", name, err)
		}
		ref := metav1.GetControllerOf(live)
		earlier := owner.Execution(live) // an Execution's, of any version (nil: not an Execution's)
		if ref != nil && ref.UID != s.exec.UID && (live.DeletionTimestamp != nil || (earlier != nil && earlier.Name == s.exec.Name)) {
			// The item of an earlier execution of this name (deleted, by
			// hand or with its installation, and created again), or one on
			// its way out: its deletion frees the name - unless it failed.
			if deleteStateOf(live) == deleteFailed {
				// It keeps the name until someone fixes or removes it; no
				// retry here can: the job fails and says so.
				return false, configProblem{ReasonDeployItemNameConflict, fmt.Errorf(
					"deploy item %s/%s (item %s of execution %s) cannot be created: the DeployItem of that name "+
						"belongs to %s and its deletion failed, so it keeps the name; fix its deletion (say with "+
						"delete-without-uninstall and operation: reconcile on it) or remove it, then start a new job%s",
					s.exec.Namespace, name, t.Name, s.exec.Name, controllerName(live),
					firstCause(map[string]*lsv1alpha1.DeployItem{name: live}, []string{name}))}
			}
			// The job waits (no error: see namesakeWait). The namesake's
			// changes wake this execution: through its controller's watch
			// when that is an earlier execution of this name, otherwise
			// through namesakeWaiters. Said in the job's Progressing
			// condition, so the wait is not silent.
			return false, deployItemNameTaken(fmt.Sprintf("deploy item %s/%s (item %s) is taken by a DeployItem of %s "+
				"that is being deleted, or will be with its owner; waiting for it to go", s.exec.Namespace, name, t.Name,
				controllerName(live)))
		}
		if ref == nil || ref.UID != s.exec.UID {
			return false, configProblem{ReasonDeployItemNameConflict, fmt.Errorf(
				"deploy item %s/%s (item %s of execution %s) exists and is controlled by %s; it is left alone: "+
					"rename the item or the execution, or delete that DeployItem", s.exec.Namespace, name, t.Name,
				s.exec.Name, controllerName(live))}
		}
		log.V(1).Info("deploy item exists already; not created again", "item", t.Name, "deployItem", name)
		for n, di := range s.items {
			if di.Name == name {
				// The cache showed it under another item name (its item-name
				// label was removed by hand): it is this item, not an orphan.
				delete(s.items, n)
			}
		}
		s.items[t.Name] = live
		return false, nil
	case apierrors.IsInvalid(err):
		return false, configProblem{ReasonDeployItemInvalid, fmt.Errorf(
			"deploy item %s (item %s) refused by the API server: %w", name, t.Name, err)}
	default:
		return false, fmt.Errorf("creating deploy item %s: %w", t.Name, err)
	}
	created := &lsv1alpha1.DeployItem{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, created); err != nil {
		return false, fmt.Errorf("reading created deploy item %s: %w", t.Name, err)
	}
	// The create's response is the whole object as the server has it now
	// (resourceVersion included): the hand-over that may follow in this
	// reconcile is guarded by that resourceVersion.
	log.Info("created deploy item", "item", t.Name, "deployItem", created.Name)
	s.items[t.Name] = created
	if stamp {
		s.stamped = append(s.stamped, t.Name)
	}
	return true, nil
}

// updateItem brings the existing item cur (the execution's own) up to date
// with template t by server-side apply (a job-start path only: spec edits).
//
// An item this controller created is owned by its "Update" entry in
// managedFields (a create is no apply); an apply would share those fields
// with it, and a field the template later drops (a dependsOn, a label,
// spec.timeout) would then never be removed. So before the first apply the
// create's fields are handed to the apply's entry, as kubectl does when
// moving from client-side to server-side apply (csaupgrade). That needs
// managedFields, which the cache strips: the item is read live first.
//
// With extraLabels (the item is up to date but for these labels), the item is
// only written when this controller owns one of them: a label it set from an
// earlier template, which the apply removes. Labels a live read found not to
// be this controller's are remembered (foreignLabels): the next job finds
// them again without a read.
func (r *Reconciler) updateItem(ctx context.Context, s *scope, t *lsv1alpha1.DeployItemTemplate, cur *lsv1alpha1.DeployItem, extraLabels []string) error {
	execKey := client.ObjectKeyFromObject(s.exec)
	if len(extraLabels) > 0 && r.foreignLabels.known(execKey, cur, extraLabels) {
		logf.FromContext(ctx).V(1).Info("deploy item up to date; its other labels are not this controller's",
			"item", t.Name, "deployItem", cur.Name, "labels", extraLabels)
		return nil
	}
	live := &lsv1alpha1.DeployItem{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cur), live); err != nil {
		return fmt.Errorf("reading deploy item %s: %w", cur.Name, err)
	}
	if ref := metav1.GetControllerOf(live); ref == nil || ref.UID != s.exec.UID {
		return configProblem{ReasonDeployItemNameConflict, fmt.Errorf(
			"deploy item %s/%s (item %s of execution %s) is now controlled by %s; it is left alone",
			live.Namespace, live.Name, t.Name, s.exec.Name, controllerName(live))}
	}
	if len(extraLabels) > 0 && !ownsAnyLabel(live, r.FieldManager, extraLabels) {
		r.foreignLabels.remember(execKey, live, extraLabels)
		logf.FromContext(ctx).V(1).Info("deploy item up to date; its other labels are not this controller's",
			"item", t.Name, "deployItem", cur.Name, "labels", extraLabels)
		return nil
	}
	// The apply may take over a label found foreign (a template now
	// setting it): what was found is void from here on.
	r.foreignLabels.drop(execKey, cur.Name)
	if createdByUpdate(live, r.FieldManager) {
		p, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(r.FieldManager), r.FieldManager)
		if err != nil {
			return fmt.Errorf("deploy item %s: moving field ownership to apply: %w", cur.Name, err)
		}
		if p != nil {
			// Guarded by the live resourceVersion (part of the patch): a
			// conflict retries.
			if err := r.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, p)); err != nil {
				return fmt.Errorf("deploy item %s: moving field ownership to apply: %w", cur.Name, err)
			}
		}
	}
	u, err := desiredItem(s.exec, t)
	if err != nil {
		return err
	}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(r.FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsInvalid(err) {
			return configProblem{ReasonDeployItemInvalid, fmt.Errorf(
				"deploy item %s (item %s) refused by the API server: %w", cur.Name, t.Name, err)}
		}
		return fmt.Errorf("applying deploy item %s: %w", t.Name, err)
	}
	applied := &lsv1alpha1.DeployItem{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, applied); err != nil {
		return fmt.Errorf("reading applied deploy item %s: %w", t.Name, err)
	}
	// The apply's response is the whole object as the server has it now
	// (status and resourceVersion included): the hand-over that may
	// follow in this reconcile is guarded by that resourceVersion.
	logf.FromContext(ctx).Info("updated deploy item", "item", t.Name, "deployItem", applied.Name)
	*cur = *applied
	return nil
}

// createdByUpdate reports whether manager owns spec fields of di through an
// "Update" entry: the item's create (the controller's other updates are
// merge patches of annotations only).
func createdByUpdate(di *lsv1alpha1.DeployItem, manager string) bool {
	for _, mf := range di.ManagedFields {
		if mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationUpdate && mf.Subresource == "" &&
			mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), `"f:spec"`) {
			return true
		}
	}
	return false
}

// ReconcileTimeFormat is the layout of the reconcile-time stamp: RFC 3339
// with milliseconds, so a deployer can measure its pickup latency (readers
// parsing time.RFC3339 accept the fraction).
const ReconcileTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// handOver gives job to the item: first the reconcile-time annotation (so a
// deployer that picks the job up at once finds it to remove), then
// status.jobID. The annotation patch carries the resourceVersion of the copy
// the decision was made on (the cache, or the response of this reconcile's
// apply): if the item changed since — e.g. the job was handed over already
// and the deployer removed reconcile-time — the patch conflicts and nothing
// is written (re-stamping reconcile-time then would fire a false pickup
// timeout); the newer version's watch event brings the next reconcile.
//
// An item created by this reconcile with the stamp (stampedAtCreate) skips
// the annotation patch, unless a trace context has to go in.
func (r *Reconciler) handOver(ctx context.Context, di *lsv1alpha1.DeployItem, job string, stampedAtCreate bool) (bool, error) {
	if di.Status.JobID == job {
		return false, nil
	}
	key := client.ObjectKeyFromObject(di)
	if r.handedOver.Stale(key, di.ResourceVersion) {
		// The cache still shows the item from before this controller's own
		// hand-over: the job is handed already (a write now could only conflict).
		return false, nil
	}
	item := di.DeepCopy()
	// The deployer continues this job's trace: the span context goes into the
	// same write (only while tracing is on).
	set := tracing.AddToPatch(ctx, item.Annotations, map[string]*string{})
	if !stampedAtCreate || len(set) > 0 {
		stamp := r.Now().UTC().Format(ReconcileTimeFormat)
		set[lsv1alpha1.ReconcileTimeAnnotation] = &stamp
	}
	if operation(item) == lsv1alpha1.OperationAbort {
		// An abort request left over from the item's earlier job (its
		// removal is a second write, which can fail): it is about a job
		// that has ended, and must not abort this one (a deployer aborts
		// whatever job runs while it is there). It goes in the same write.
		set[lsv1alpha1.OperationAnnotation] = nil
		set[lsv1alpha1.AbortTimeAnnotation] = nil
	}
	if _, ok := item.Annotations[timeouts.AbortReasonAnnotation]; ok {
		// The reason of that left-over abort goes with it.
		set[timeouts.AbortReasonAnnotation] = nil
	}
	replaced := []string{item.ResourceVersion}
	if len(set) > 0 {
		if err := patch.Annotations(ctx, r.Client, r.FieldManager, item, item.ResourceVersion, set); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				logf.FromContext(ctx).V(1).Info("deploy item changed since it was read; hand-over waits for its event",
					"deployItem", item.Name, "error", err.Error())
				return false, nil
			}
			return false, err
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": lsv1alpha1.SchemeGroupVersion.String(),
		"kind":       "DeployItem",
		"metadata":   map[string]any{"name": item.Name, "namespace": item.Namespace},
		"status":     map[string]any{"jobID": job},
	}}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(r.FieldManager), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("handing job to deploy item %s: %w", item.Name, err)
	}
	if rv := u.GetResourceVersion(); rv != "" && rv != item.ResourceVersion {
		replaced = append(replaced, item.ResourceVersion)
		item.ResourceVersion = rv
	}
	r.handedOver.Replaced(key, replaced...)
	item.Status.JobID = job
	*di = *item
	return true, nil
}

// itemState classifies an item against the execution's current job.
type itemState int

const (
	statePending itemState = iota // not handed the job yet
	stateRunning
	stateSucceeded
	stateFailed
)

// stateOf classifies di as the function stateOf does, except that an item
// this controller has just handed job to counts as running while the cache
// still shows the copy the hand-over replaced (handedOver): that copy shows
// the item's earlier job, but the item runs this one. Without it a reconcile
// in that moment could end the job (a sibling failed, or nothing seems to
// run) while the item deploys.
func (r *Reconciler) stateOf(di *lsv1alpha1.DeployItem, job string) itemState {
	st := stateOf(di, job)
	if st == statePending && di != nil && r.handedOver.Stale(client.ObjectKeyFromObject(di), di.ResourceVersion) {
		return stateRunning
	}
	return st
}

func stateOf(di *lsv1alpha1.DeployItem, job string) itemState {
	switch {
	case di == nil || di.Status.JobID != job:
		return statePending
	case !jobid.Finished(di.Status.JobID, di.Status.JobIDFinished):
		return stateRunning
	case di.Status.Phase == lsv1alpha1.PhaseInit || di.Status.Phase == lsv1alpha1.PhaseProgressing:
		// The job is finished, but the deployer re-applies within it (a
		// hook-forced re-apply against drift, still pending): not a failure;
		// its outcome is what counts.
		return stateRunning
	case di.Status.Phase == lsv1alpha1.PhaseSucceeded:
		return stateSucceeded
	default:
		return stateFailed
	}
}
