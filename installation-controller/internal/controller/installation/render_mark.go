package installation

import (
	"context"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/tmpl"
)

// RenderingAnnotation marks an installation while this controller renders
// its templates and evaluates its data mappings for a job:
// "<job ID>@<process ID>". A render that takes the process down (out of
// memory) leaves it behind; the next process finds the mark of the same job
// from another process and fails the job instead of rendering again, which
// would take it down again.
const RenderingAnnotation = "installation.terrace.dev/rendering"

// ReasonRenderAborted fails a job whose render stopped with the process
// that ran it.
const ReasonRenderAborted = "RenderAborted"

// renderedJobs remembers, per installation, the job and phase whose render
// this process finished once: rendering them again (a phase that waits runs
// again on every event) writes no mark. The two writes of a mark would wake
// the installation again on every such run, and a render this process got
// through once does not take it down the next time.
type renderedJobs struct {
	mu sync.Mutex
	m  map[types.NamespacedName]string
}

func (j *renderedJobs) has(k types.NamespacedName, v string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.m[k] == v
}

func (j *renderedJobs) set(k types.NamespacedName, v string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.m == nil {
		j.m = map[types.NamespacedName]string{}
	}
	j.m[k] = v
}

func (j *renderedJobs) forget(k types.NamespacedName) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.m, k)
}

// withRenderMark runs render, marking the installation while a render of it
// holds a large part of the template budget, the first time this process
// renders the job's phase; a mark of this job left by another process fails
// the job instead.
// Without templates or mappings to run (renders false) nothing is marked.
func (r *Reconciler) withRenderMark(ctx context.Context, s *scope, renders bool, render func(context.Context) error) error {
	job := s.inst.Status.JobID
	done := job + "/" + string(s.inst.Status.Phase)
	if !renders || r.rendered.has(key(s.inst), done) {
		return render(ctx)
	}
	if j, process, ok := strings.Cut(s.inst.Annotations[RenderingAnnotation], "@"); ok && j == job && process != r.ProcessID {
		if err := r.setRenderMark(ctx, s, nil); err != nil {
			return err
		}
		return jobEndsf(ReasonRenderAborted, lsv1alpha1.ErrorInternalProblem,
			"the controller process %s stopped while it rendered the templates or data mappings of job %s (phase %s), likely out of memory: the job is failed instead of rendered again; "+
				"make the blueprint's renders and imports smaller, then add the reconcile annotation to the root installation to start a new job", process, job, s.inst.Status.Phase)
	}
	// The mark is written only once a render grows large (a small one
	// cannot take the process down), so the usual job spends no request
	// on it.
	mark := job + "@" + r.ProcessID
	err := render(tmpl.WithLargeRenderHook(ctx, largeRenderBytes, func() error {
		return r.setRenderMark(ctx, s, &mark)
	}))
	if cerr := r.setRenderMark(ctx, s, nil); cerr != nil && err == nil {
		return cerr
	}
	r.rendered.set(key(s.inst), done)
	return err
}

// largeRenderBytes is what a render holds of the process-wide template
// budget when its installation is marked as rendering.
const largeRenderBytes = 16 << 20

// setRenderMark writes (mark) or removes (nil) the render mark, guarded by
// the resourceVersion read: it is a metadata-only patch, so the status this
// reconcile computed is kept, and only the installation's metadata follows
// the response.
func (r *Reconciler) setRenderMark(ctx context.Context, s *scope, mark *string) error {
	cur, ok := s.inst.Annotations[RenderingAnnotation]
	if (mark == nil && !ok) || (mark != nil && ok && cur == *mark) {
		return nil
	}
	var value any
	if mark != nil {
		value = *mark
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(lsv1alpha1.SchemeGroupVersion.WithKind("Installation"))
	meta.Name, meta.Namespace = s.inst.Name, s.inst.Namespace
	patch := mergePatch{"metadata": map[string]any{
		"annotations":     map[string]any{RenderingAnnotation: value},
		"resourceVersion": s.inst.ResourceVersion,
	}}
	return s.track(func() error {
		if err := r.Client.Patch(ctx, meta, patch, client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("marking the render of job %s: %w", s.inst.Status.JobID, err)
		}
		s.inst.Annotations = meta.Annotations
		s.inst.ResourceVersion = meta.ResourceVersion
		return nil
	})
}
