package components

import (
	"fmt"
	"maps"

	"github.com/opencontainers/go-digest"
)

// Job identifies one job of one installation. The resolutions of a job
// read the content its first resolution read: a tag moved while the job
// runs is seen by the next job, never half-way through this one.
type Job struct {
	// Installation is the installation's UID: pins are never shared
	// between installations, so each one's first lookup is its own
	// (authorised with its own pull secrets).
	Installation string
	// ID is the job's ID.
	ID string
}

// jobPins remembers, per installation, the manifest digests its running
// job resolved, keyed by pinKey. An installation holds one entry (a new job
// replaces the last one's); the least recently used installations are
// forgotten beyond Options.JobPins. Memory does not outlive the process: a
// job that runs on after a restart looks its tags up once more.
type jobPins struct {
	lru *memoryCache // installation UID → *pinned, each charged 1
}

type pinned struct {
	job     string
	digests map[string]digest.Digest
}

func newJobPins(limit int) *jobPins {
	return &jobPins{lru: newMemoryCache(int64(limit))}
}

// of returns the digests job resolved before; nil when none are
// remembered (the job's first resolution, or forgotten).
func (p *jobPins) of(job Job) map[string]digest.Digest {
	if job.Installation == "" || job.ID == "" {
		return nil
	}
	v, ok := p.lru.get(job.Installation)
	if !ok || v.(*pinned).job != job.ID {
		return nil
	}
	return v.(*pinned).digests
}

// remember adds the digests job read to those it had; the maps are never
// changed once stored, as resolutions read them without the lock.
func (p *jobPins) remember(job Job, read map[string]digest.Digest) {
	if job.Installation == "" || job.ID == "" || len(read) == 0 {
		return
	}
	all := maps.Clone(p.of(job))
	if all == nil {
		all = make(map[string]digest.Digest, len(read))
	}
	maps.Copy(all, read)
	p.lru.put(job.Installation, &pinned{job: job.ID, digests: all}, 1)
}

// pinKey names a component version by where it is read from.
func pinKey(base, name, version string) string {
	return base + "//" + name + ":" + version
}

// ChangedDuringJobError says that the manifest a job started with is
// neither cached nor in the registry any more (its tag moved and the old
// manifest was deleted), so the job cannot go on with the same content.
type ChangedDuringJobError struct {
	Component, Registry string
	Digest              digest.Digest
	Err                 error
}

func (e *ChangedDuringJobError) Error() string {
	return fmt.Sprintf("component %s in %s: the job started with manifest %s, which is no longer cached (--%s) and no longer in the registry: %v",
		e.Component, e.Registry, e.Digest, FlagCacheBytes, e.Err)
}

func (e *ChangedDuringJobError) Unwrap() error { return e.Err }
