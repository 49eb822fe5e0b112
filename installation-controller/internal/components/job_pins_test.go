package components

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/terrace-dev/terrace/kit/ocm"
)

// jobEnv is a root component with a blueprint that references a library
// component, both pushed once.
type jobEnv struct {
	*env
	r *Resolver
}

func newJobEnv(t *testing.T, opts Options) *jobEnv {
	t.Helper()
	e := &jobEnv{env: newEnv(t)}
	e.pushLib(t, "first")
	e.pushApp(t, "first")
	e.r = e.resolver(t, opts)
	return e
}

func (e *jobEnv) pushApp(t *testing.T, marker string) digest.Digest {
	t.Helper()
	return e.push(t, component{name: "acme.org/app", version: "1.0.0", refs: []ocm.ComponentReference{reference("lib", "acme.org/lib", "1.0.0")},
		blobs: []blobResource{{"blueprint", blueprintTarGzip, blueprintArchive(t, true, marker)}}})
}

func (e *jobEnv) pushLib(t *testing.T, marker string) {
	t.Helper()
	e.push(t, component{name: "acme.org/lib", version: "1.0.0", blobs: []blobResource{{"data", "text/plain", []byte(marker)}}})
}

// read resolves acme.org/app:1.0.0 within job and returns the marker of
// its blueprint and the digest of the library it read.
func (e *jobEnv) read(t *testing.T, job Job) (string, string, error) {
	t.Helper()
	req := e.ref("acme.org/app", "1.0.0")
	req.Job = job
	cv, err := e.r.Resolve(context.Background(), req)
	if err != nil {
		return "", "", err
	}
	bp, err := e.r.Blueprint(context.Background(), cv.Root, ResourceRef{Name: "blueprint"})
	if err != nil {
		t.Fatal(err)
	}
	return bp.Files["blueprint.yaml"], cv.Components["acme.org/lib:1.0.0"].Digest.String(), nil
}

// A job looks each tag up once: its later resolutions read the digests the
// first one read, even after the tags moved; the next job, and another
// installation, look the tags up and read what they point at now.
func TestAJobLooksEachTagUpOnce(t *testing.T) {
	e := newJobEnv(t, Options{})
	job := Job{Installation: "uid-a", ID: "job-1"}
	firstBP, firstLib, err := e.read(t, job)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.counter.count("HEAD manifest"); n != 2 {
		t.Fatalf("the job's first resolution looked %d tags up, want 2 (root and reference; counts %v)", n, e.counter.counts)
	}
	e.pushApp(t, "second")
	e.pushLib(t, "second")
	e.counter.reset()

	bp, lib, err := e.read(t, job)
	if err != nil {
		t.Fatal(err)
	}
	if bp != firstBP || lib != firstLib {
		t.Errorf("the job's second resolution read the moved tags: blueprint %q, library %s (started with %q, %s)", bp, lib, firstBP, firstLib)
	}
	if n := len(e.counter.counts); n != 0 {
		t.Errorf("the job's second resolution made registry requests, want none (counts %v)", e.counter.counts)
	}

	for _, next := range []Job{{Installation: "uid-a", ID: "job-2"}, {Installation: "uid-b", ID: "job-1"}} {
		e.counter.reset()
		bp, lib, err := e.read(t, next)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(bp, "second") || lib == firstLib {
			t.Errorf("job %+v read the content the tags pointed at before: blueprint %q", next, bp)
		}
		if n := e.counter.count("HEAD manifest"); n != 2 {
			t.Errorf("job %+v looked %d tags up, want 2", next, n)
		}
	}
}

// Beyond --component-job-pins installations the least recently used is
// forgotten: its job looks its tags up again; within it, it does not.
func TestJobPinsAreBounded(t *testing.T) {
	a, b := Job{Installation: "uid-a", ID: "job-1"}, Job{Installation: "uid-b", ID: "job-1"}
	for limit, want := range map[int]int{1: 2, 2: 0} {
		e := newJobEnv(t, Options{JobPins: limit})
		for _, job := range []Job{a, b} {
			if _, _, err := e.read(t, job); err != nil {
				t.Fatal(err)
			}
		}
		e.counter.reset()
		if _, _, err := e.read(t, a); err != nil {
			t.Fatal(err)
		}
		if n := e.counter.count("HEAD manifest"); n != want {
			t.Errorf("with room for %d installations, the first one's job looked %d tags up again, want %d", limit, n, want)
		}
	}
}

// When the content a job started with has left the cache and its tag
// moved, the job reads its content again by the digest it started with:
// it goes on with the blueprint it started with, not the tag's new one.
func TestAJobReadsItsDigestAgainWhenTheCacheLostIt(t *testing.T) {
	e := newJobEnv(t, Options{CacheBytes: 1}) // nothing fits: every read goes to the registry
	job := Job{Installation: "uid-a", ID: "job-1"}
	firstBP, firstLib, err := e.read(t, job)
	if err != nil {
		t.Fatal(err)
	}
	e.pushApp(t, "second")
	e.pushLib(t, "second")
	e.counter.reset()
	bp, lib, err := e.read(t, job)
	if err != nil {
		t.Fatalf("the job's content read again by digest: %v", err)
	}
	if bp != firstBP || lib != firstLib {
		t.Errorf("the job read the moved tags: blueprint %q, library %s (started with %q, %s)", bp, lib, firstBP, firstLib)
	}
	if n := e.counter.count("HEAD manifest"); n != 0 {
		t.Errorf("the job looked %d tags up again, want none", n)
	}

	bp, _, err = e.read(t, Job{Installation: "uid-a", ID: "job-2"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(bp, "second") {
		t.Errorf("the next job read blueprint %q, want the one the tag points at now", bp)
	}
}

// When the manifest a job started with is gone from the registry too, the
// job cannot go on with its content: the error names the component
// version, the digest, the registry and the cache's flag.
func TestAJobWhoseDigestIsGoneFails(t *testing.T) {
	e := newJobEnv(t, Options{CacheBytes: 1})
	job := Job{Installation: "uid-a", ID: "job-1"}
	if _, _, err := e.read(t, job); err != nil {
		t.Fatal(err)
	}
	r, err := remote.NewRepository(e.host + "/ocm/component-descriptors/acme.org/app")
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	first, err := r.Resolve(context.Background(), "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	e.pushApp(t, "second")
	if err := r.Delete(context.Background(), first); err != nil {
		t.Fatalf("deleting the first manifest: %v", err)
	}

	_, _, err = e.read(t, job)
	var changed *ChangedDuringJobError
	if !errors.As(err, &changed) {
		t.Fatalf("got %v, want a ChangedDuringJobError", err)
	}
	wantErr(t, err, "component acme.org/app:1.0.0 in "+e.host+"/ocm", first.Digest.String(), "no longer in the registry", "--component-cache-bytes")
}
