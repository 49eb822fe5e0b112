package claim

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/text"
	"github.com/terrace-dev/terrace/sandbox-provisioner/internal/sandbox"
)

// DefaultSpaceRequestWarning is how long a SpaceRequest may stay without a
// Ready condition, or Ready=False with reason Provisioning, before a Warning
// on its claim says so. The spacerequest-stub provisions within a second; the
// host-operator within seconds; under a burst of claims on a small machine
// within tens of seconds. A minute is past that, so the warning does not cry
// wolf under load, and still early enough to matter to someone waiting.
const DefaultSpaceRequestWarning = time.Minute

// maxQuoted bounds what an Event quotes of a SpaceRequest's condition
// message: an Event's note is limited to 1 kB, and the SpaceRequest keeps the
// whole message.
const maxQuoted = 512

// Topics of the claim's Warnings; each is recorded once per distinct message.
const (
	topicClass        = "class"
	topicSpaceRequest = "spacerequest"
)

// claimWarnings remembers, per claim, the last Warning of each topic (what
// it said, without what changes by itself, like an age),
// so that a claim reconciled again and again while it waits (every write to
// it, to its SpaceRequest, to its class) records each Warning once per
// distinct message, not once per reconcile. A topic is cleared when its
// cause goes (the class loads, the SpaceRequest is Ready), so a problem that
// comes back is reported again; a claim is forgotten when it is gone, no
// longer waits for a target, or has one. Memory only: no status write (the
// provisioner writes no claim status, and a write would bring another
// reconcile); a restarted provisioner reports a problem still going once more.
// Safe for concurrent use; the zero value is ready.
type claimWarnings struct {
	mu sync.Mutex
	m  map[types.NamespacedName]claimNotes
}

// claimNotes are one claim object's (UID) last Warnings by topic.
type claimNotes struct {
	uid  types.UID
	last map[string]string
}

// recorded reports whether id is the last Warning recorded for topic on the
// claim object key/uid.
func (w *claimWarnings) recorded(key types.NamespacedName, uid types.UID, topic, id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, ok := w.m[key]
	if !ok || n.uid != uid {
		return false
	}
	last, ok := n.last[topic]
	return ok && last == id
}

// remember records id as topic's last Warning on the claim object key/uid (a
// new claim object of the same name starts afresh).
func (w *claimWarnings) remember(key types.NamespacedName, uid types.UID, topic, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]claimNotes{}
	}
	n, ok := w.m[key]
	if !ok || n.uid != uid {
		n = claimNotes{uid: uid, last: map[string]string{}}
		w.m[key] = n
	}
	n.last[topic] = id
}

// clear drops topic's note of key: its cause went.
func (w *claimWarnings) clear(key types.NamespacedName, topic string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n, ok := w.m[key]; ok {
		delete(n.last, topic)
		if len(n.last) == 0 {
			delete(w.m, key)
		}
	}
}

// forget drops everything remembered of key.
func (w *claimWarnings) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}

// warnOnce records the Warning Event note on the claim unless what it says,
// id, is the last thing recorded for topic; it reports whether it recorded
// one.
func (r *Reconciler) warnOnce(s *scope, topic, id string, related runtime.Object, reason, note string) bool {
	key := client.ObjectKeyFromObject(s.claim)
	if r.warnings.recorded(key, s.claim.UID, topic, id) {
		return false
	}
	r.warnings.remember(key, s.claim.UID, topic, id)
	r.Recorder.Eventf(s.claim, related, corev1.EventTypeWarning, reason, "Provision", "%s", note)
	return true
}

// spaceRequestWarning is the delay of the SpaceRequest warnings; ok false
// when they are switched off. Zero means DefaultSpaceRequestWarning.
func (r *Reconciler) spaceRequestWarning() (time.Duration, bool) {
	return r.SpaceRequestWarning.Or(DefaultSpaceRequestWarning)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// spaceRequestNotice is a Warning about the SpaceRequest a claim waits for.
type spaceRequestNotice struct {
	reason, note string
	// id is what the note says that matters (not the SpaceRequest's age):
	// the SpaceRequest, and its condition.
	id string
	// overdue: warranted only because the SpaceRequest took too long, not
	// by what it says; confirmed with the API server before it is recorded.
	overdue bool
}

// noticeFor says what, if anything, the claim should be told about its
// SpaceRequest sr, which is not Ready, at now; when nothing yet, wait is how
// long until something may be due (zero: only an event can change it).
//
// No Ready condition, Ready=False with reason Provisioning and Ready=True
// with an incomplete status are what a SpaceRequest shows while it is being
// provisioned normally: quiet until the SpaceRequest is older than the
// warning delay. The SpaceRequest controller also reports its failures as
// Provisioning (the spacerequest-stub: "Namespace … already exists and was
// not created for this SpaceRequest", a step's error), with nothing but the
// message to tell them from progress; the provisioner does not guess from
// another controller's wording, so those show when the delay is over. Any
// other Ready=False reason is no provisioning in progress and is reported at
// once.
func (r *Reconciler) noticeFor(sr *toolchainv1alpha1.SpaceRequest, now time.Time) (n *spaceRequestNotice, wait time.Duration) {
	c := meta.FindStatusCondition(sr.Status.Conditions, toolchainv1alpha1.ConditionReady)
	inProgress := c == nil || c.Status == metav1.ConditionTrue || c.Reason == toolchainv1alpha1.ReasonProvisioning
	if inProgress {
		delay, on := r.spaceRequestWarning()
		if !on {
			return nil, 0
		}
		if elapsed := now.Sub(sr.CreationTimestamp.Time); elapsed < delay {
			return nil, delay - elapsed
		}
	}
	id := string(sr.UID) + "/"
	switch {
	case c == nil:
		return &spaceRequestNotice{overdue: true, id: id + "no status", reason: EventSpaceRequestUnanswered, note: fmt.Sprintf(
			"SpaceRequest %s has no status %s after its creation: nothing answers it. Is the SpaceRequest controller "+
				"(the toolchain host-operator, or the spacerequest-stub) running and watching namespace %s?",
			sr.Name, age(sr, now), sr.Namespace)}, 0
	case c.Status == metav1.ConditionTrue:
		_, why := sandbox.SpaceRequestReady(sr)
		return &spaceRequestNotice{overdue: true, id: id + why, reason: EventSpaceRequestNotReady, note: fmt.Sprintf(
			"SpaceRequest %s is not usable %s after its creation: %s", sr.Name, age(sr, now), why)}, 0
	default:
		note := fmt.Sprintf("SpaceRequest %s is not Ready (%s)", sr.Name, c.Reason)
		if c.Message != "" {
			note += ": " + quote(c.Message)
		}
		return &spaceRequestNotice{overdue: inProgress, id: id + c.Reason + "/" + c.Message, reason: EventSpaceRequestNotReady, note: note}, 0
	}
}

func age(sr *toolchainv1alpha1.SpaceRequest, now time.Time) time.Duration {
	return now.Sub(sr.CreationTimestamp.Time).Truncate(time.Second)
}

// warnSpaceRequest records, once per distinct notice, a Warning on the claim
// about its SpaceRequest, which is not Ready, or asks to come back when one
// may be due. It costs no request unless a warning is due: an overdue one is
// confirmed with the API server first, so a SpaceRequest whose progress the
// cache does not show yet raises no false alarm. It always stops the reconcile:
// the claim waits for its SpaceRequest.
func (r *Reconciler) warnSpaceRequest(ctx context.Context, s *scope) (flow.Result, error) {
	now := r.now()
	n, wait := r.noticeFor(s.sr, now)
	if n == nil {
		return flow.Stop().RequeueAfter(wait), nil
	}
	key := client.ObjectKeyFromObject(s.claim)
	if r.warnings.recorded(key, s.claim.UID, topicSpaceRequest, n.id) {
		return flow.Stop(), nil
	}
	sr := s.sr
	if n.overdue {
		live := &toolchainv1alpha1.SpaceRequest{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.sr), live); err != nil {
			if apierrors.IsNotFound(err) {
				// Its deletion event brings the claim back.
				return flow.Stop(), nil
			}
			return flow.Stop(), fmt.Errorf("reading SpaceRequest %s: %w", s.sr.Name, err)
		}
		if live.UID != s.sr.UID || !live.DeletionTimestamp.IsZero() {
			return flow.Stop(), nil
		}
		if ok, _ := sandbox.SpaceRequestReady(live); ok {
			// Its watch event brings the claim back.
			return flow.Stop(), nil
		}
		if n, wait = r.noticeFor(live, now); n == nil {
			return flow.Stop().RequeueAfter(wait), nil
		}
		sr = live
	}
	if r.warnOnce(s, topicSpaceRequest, n.id, sr, n.reason, n.note) {
		ctrl.LoggerFrom(ctx).Info("the SpaceRequest is not Ready; told the claim", "reason", n.reason, "note", n.note)
	}
	return flow.Stop(), nil
}

// quote cuts a message longer than maxQuoted bytes in its middle, keeping as
// much of its end as of its start: its start says what failed, its end often
// why.
func quote(msg string) string {
	return text.CutMiddle(msg, maxQuoted, (maxQuoted-len(text.Cut))/2)
}
