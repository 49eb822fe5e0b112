package installation

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
)

// phaseObjectsCreated hands the job to every sub-installation and the execution.
func (r *Reconciler) phaseObjectsCreated(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	subs, exec, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return "", err
	}
	for _, sub := range subs {
		if sub.DeletionTimestamp == nil {
			if err := r.handOverInstallation(ctx, s, sub, s.inst.Status.JobID); err != nil {
				return "", err
			}
		}
	}
	if exec != nil && exec.DeletionTimestamp == nil {
		if err := r.handOverExecution(ctx, s, exec, s.inst.Status.JobID); err != nil {
			return "", err
		}
	}
	return lsv1alpha1.PhaseProgressing, nil
}

// phaseProgressing waits until every sub-object finished the job.
func (r *Reconciler) phaseProgressing(ctx context.Context, s *scope) (lsv1alpha1.Phase, error) {
	subs, exec, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return "", err
	}
	if err := r.awaitCached(ctx, s, subs, exec); err != nil {
		return "", err
	}
	var p progress
	p.job = s.inst.Status.JobID
	for _, sub := range subs {
		p.checkSub(sub)
	}
	if exec != nil {
		if err := p.checkExecution(exec); err != nil {
			return "", err
		}
	}
	switch {
	case len(p.working) > 0:
		return "", waitf("%s to finish", strings.Join(p.working, ", "))
	case len(p.failed) > 0:
		return "", jobEndsf(ReasonSubObjectsFailed, lsv1alpha1.ErrorForInfoOnly, "%s", subObjectsFailedMessage(p.failed))
	}
	return lsv1alpha1.PhaseCompleting, nil
}

// awaitCached waits for the sub-objects of the status the cache does not
// show yet. What this job created is in the status; the caches (other
// informers) may not show it yet. A sub-object missing from them is waited
// for, not taken for absent: else the job would finish before it.
func (r *Reconciler) awaitCached(ctx context.Context, s *scope, subs []*lsv1alpha1.Installation, exec *lsv1alpha1.Execution) error {
	have := map[string]bool{}
	for _, sub := range subs {
		have[sub.Name] = true
	}
	missing := exec == nil && s.inst.Status.ExecutionReference != nil
	for _, ref := range s.inst.Status.InstallationReferences {
		missing = missing || !have[ref.Reference.Name]
	}
	if !missing {
		return nil
	}
	lagging, err := r.confirmMissing(ctx, s, exec == nil)
	if err != nil {
		return err
	}
	if len(lagging) > 0 {
		return waitf("%s to appear in the cache", strings.Join(lagging, ", "))
	}
	return nil
}

// progress sorts the sub-objects of job into those still working and those
// that failed it. The failed sub-objects' lastErrors come from the same
// (cached) objects: naming the cause costs no request.
type progress struct {
	job     string
	working []string
	failed  []subObjectFailure
}

func (p *progress) check(kind, name, finished string, phase lsv1alpha1.Phase, lastError *lsv1alpha1.Error) {
	switch {
	case !finishedWith(finished, p.job):
		p.working = append(p.working, kind+" "+name)
	case phase != lsv1alpha1.PhaseSucceeded:
		p.failed = append(p.failed, subObjectFailure{kind: kind, name: name, phase: phase, lastError: lastError})
	}
}

func (p *progress) checkSub(sub *lsv1alpha1.Installation) {
	st := sub.Status
	switch {
	case sub.DeletionTimestamp == nil:
		p.check("sub-installation", sub.Name, st.JobIDFinished, st.Phase, st.LastError)
	case st.JobID == p.job || st.JobID != st.JobIDFinished:
		// Deleted by hand during this job: it runs the job it holds to
		// its end (an install job ends DeletedDuringJob, a job it had
		// not started yet runs as its deletion), and the job does not
		// finish before it, as for any sub-object: else the next job
		// would find it mid-flow. Its outcome in this job counts.
		if !finishedWith(st.JobIDFinished, p.job) {
			p.working = append(p.working, "sub-installation "+sub.Name+" (deleted by hand)")
			return
		}
		p.check("sub-installation", sub.Name, st.JobIDFinished, st.Phase, st.LastError)
	}
	// Else it is idle, deleted by hand without this job: left out; the
	// next job's Init hands it its deletion and creates it again.
}

func (p *progress) checkExecution(exec *lsv1alpha1.Execution) error {
	st := exec.Status
	p.check("execution", exec.Name, st.JobIDFinished, st.Phase, st.LastError)
	if finishedWith(st.JobIDFinished, p.job) && st.ObservedGeneration > 0 && st.ObservedGeneration < exec.Generation {
		// The execution ran the job with a spec older than the one this
		// job wrote (it had started the job before Init re-templated
		// it: a job start repeated after a conflict): its items are not
		// this job's, so the job must not count as done.
		return flow.Stalledf(ReasonSpecChanged,
			"execution %s ran the job with its spec of generation %d, not the current %d this job wrote (the spec changed while the job started): add the reconcile annotation to the root installation to start a job with the new spec",
			exec.Name, st.ObservedGeneration, exec.Generation)
	}
	return nil
}

// ReasonSubObjectGone: a Warning event when a sub-installation this job
// created or handed the job to is gone before it finished (deleted by hand:
// its finalizer removed, or its deletion ran with this job, which it had
// not started when it was deleted).
const ReasonSubObjectGone = "SubObjectGone"

// confirmMissing asks the API server about the sub-objects of the status
// that the cache does not show (a rare path: normally the cache has caught
// up), and returns those that exist: the cache lags, the job waits for them.
// A sub-installation that is gone (deleted by hand: its finalizer removed,
// or it ran this job, handed over before it started it, as its deletion)
// is left out: the job goes on without it (Warning event SubObjectGone) and
// the next job's Init creates it again. A gone execution fails the job: its exports
// are the job's result, and waiting would never end.
func (r *Reconciler) confirmMissing(ctx context.Context, s *scope, execMissing bool) ([]string, error) {
	inst := s.inst
	subs, _, err := r.subObjectsOf(ctx, s)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, sub := range subs {
		have[sub.Name] = true
	}
	key, job := client.ObjectKeyFromObject(inst), inst.Status.JobID
	var lagging, gone []string
	for _, ref := range inst.Status.InstallationReferences {
		name := ref.Reference.Name
		if have[name] || r.gone.known(key, inst.UID, job, name) {
			// Confirmed gone earlier in this job: no second read, no
			// second event.
			continue
		}
		sub := &lsv1alpha1.Installation{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: name}, sub)
		switch {
		case apierrors.IsNotFound(err), err == nil && !isOwnedBy(sub, inst):
			gone = append(gone, name)
		case err != nil:
			return nil, fmt.Errorf("reading sub-installation %s: %w", name, err)
		default:
			lagging = append(lagging, "sub-installation "+name)
		}
	}
	if ref := inst.Status.ExecutionReference; ref != nil && execMissing {
		exec := &lsv1alpha1.Execution{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: ref.Name}, exec)
		switch {
		case apierrors.IsNotFound(err), err == nil && !isOwnedBy(exec, inst):
			return nil, jobEndsf(ReasonSubObjectsFailed, lsv1alpha1.ErrorInternalProblem,
				"execution %s is gone before it finished the job (deleted by hand, its finalizer removed): the next job creates it again", ref.Name)
		case err != nil:
			return nil, fmt.Errorf("reading execution %s: %w", ref.Name, err)
		default:
			lagging = append(lagging, "execution "+ref.Name)
		}
	}
	if len(gone) > 0 {
		r.gone.add(key, inst.UID, job, gone...)
		logf.FromContext(ctx).Info("sub-installations of the job are gone; going on without them", "subInstallations", gone)
		r.Recorder.Eventf(inst, nil, "Warning", ReasonSubObjectGone, "Progressing",
			"sub-installations %s are gone before they finished the job (deleted by hand): the job goes on without them, the next job creates them again", strings.Join(gone, ", "))
	}
	return lagging, nil
}
