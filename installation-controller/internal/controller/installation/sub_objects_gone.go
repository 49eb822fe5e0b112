package installation

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// goneSubs remembers, per installation, the sub-installations of its
// current job that the API server confirmed gone (confirmMissing): they stay
// listed in the status until the job ends, so without it every Progressing
// reconcile of that job would read each of them again and repeat the
// SubObjectGone Warning. What is remembered holds for one installation
// object (UID) and one job; a restarted controller confirms once more.
type goneSubs struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]goneInJob
}

type goneInJob struct {
	uid   types.UID
	job   string
	names sets.Set[string]
}

// known reports whether name was confirmed gone in job of the installation
// key with uid.
func (g *goneSubs) known(key types.NamespacedName, uid types.UID, job, name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	j, ok := g.jobs[key]
	return ok && j.uid == uid && j.job == job && j.names.Has(name)
}

// add records names as confirmed gone in job of the installation key with
// uid; what was recorded for another object or job is dropped.
func (g *goneSubs) add(key types.NamespacedName, uid types.UID, job string, names ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.jobs == nil {
		g.jobs = map[types.NamespacedName]goneInJob{}
	}
	j, ok := g.jobs[key]
	if !ok || j.uid != uid || j.job != job {
		j = goneInJob{uid: uid, job: job, names: sets.New[string]()}
	}
	j.names.Insert(names...)
	g.jobs[key] = j
}

// forget drops what is remembered of the installation key.
func (g *goneSubs) forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.jobs, key)
}
