package components

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
)

// TestCacheReadsADigestOnce: a second resolution of an unchanged version
// looks its tag up and fetches nothing else; a re-pushed tag is read anew.
func TestCacheReadsADigestOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.push(t, component{name: "acme.org/app", version: "1.0.0", blobs: []blobResource{{"blueprint", blueprintTarGzip, blueprintArchive(t, true, "first")}}})
	r := e.resolver(t, Options{})
	read := func() string {
		t.Helper()
		cv, err := r.Resolve(ctx, e.ref("acme.org/app", "1.0.0"))
		if err != nil {
			t.Fatal(err)
		}
		bp, err := r.Blueprint(ctx, cv.Root, ResourceRef{Name: "blueprint"})
		if err != nil {
			t.Fatal(err)
		}
		return bp.Files["blueprint.yaml"]
	}
	read()
	if e.counter.count("GET blob") == 0 {
		t.Fatal("the first read fetched no blobs: the counter does not see the requests")
	}
	if n := e.counter.count("GET manifest"); n != 1 {
		t.Errorf("the first read fetched the manifest %d times, want once: the blueprint's layer is found in the layers read with it (counts %v)", n, e.counter.counts)
	}
	e.counter.reset()
	if !strings.Contains(read(), "first") {
		t.Fatal("second read returned another blueprint")
	}
	if n := e.counter.count("GET blob") + e.counter.count("GET manifest"); n != 0 {
		t.Errorf("the second read of the same digest fetched %d manifests and blobs, want 0 (counts %v)", n, e.counter.counts)
	}
	if e.counter.count("HEAD manifest") != 1 {
		t.Errorf("the second read looked the tag up %d times, want once", e.counter.count("HEAD manifest"))
	}

	e.push(t, component{name: "acme.org/app", version: "1.0.0", blobs: []blobResource{{"blueprint", blueprintTarGzip, blueprintArchive(t, true, "second")}}})
	if !strings.Contains(read(), "second") {
		t.Error("a re-pushed tag still gave the cached blueprint")
	}
}

func TestConcurrentResolutionsShareOneRead(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.push(t, component{name: "acme.org/app", version: "1.0.0", blobs: []blobResource{{"blueprint", blueprintTarGzip, blueprintArchive(t, true, "x")}}})
	r := e.resolver(t, Options{})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cv, err := r.Resolve(ctx, e.ref("acme.org/app", "1.0.0"))
			if err == nil {
				_, err = r.Blueprint(ctx, cv.Root, ResourceRef{Name: "blueprint"})
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// One descriptor read is a manifest, the config and the descriptor
	// layer; the blueprint another manifest read and its blob. Racing
	// goroutines that arrive after a read ended may repeat it, so the
	// bound is loose, but far below 20 reads.
	if n := e.counter.count("GET blob"); n > 9 {
		t.Errorf("20 concurrent resolutions fetched %d blobs", n)
	}
}

func TestMemoryCacheStaysWithinItsBudget(t *testing.T) {
	var evicted []string
	c := newMemoryCache(10)
	c.onEvict = func(k string) { evicted = append(evicted, k) }
	c.put("a", 1, 4)
	c.put("b", 2, 4)
	c.get("a") // b is now the least recently used
	c.put("c", 3, 4)
	if _, ok := c.get("b"); ok {
		t.Error("b was kept beyond the budget")
	}
	if _, ok := c.get("a"); !ok {
		t.Error("a, recently used, was evicted")
	}
	c.put("huge", 4, 11)
	if _, ok := c.get("huge"); ok || c.used > 10 {
		t.Errorf("an entry over the whole budget was kept (used %d)", c.used)
	}
	if strings.Join(evicted, ",") != "b,huge" {
		t.Errorf("evicted %v", evicted)
	}
}

func TestDiskCacheServesBlueprintsAcrossRestarts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	archive := blueprintArchive(t, true, "on disk")
	e.push(t, component{name: "acme.org/app", version: "1.0.0", blobs: []blobResource{{"blueprint", blueprintTarGzip, archive}}})
	dir := t.TempDir()
	for round := range 2 {
		e.counter.reset()
		r := e.resolver(t, Options{CacheDir: dir})
		cv, err := r.Resolve(ctx, e.ref("acme.org/app", "1.0.0"))
		if err != nil {
			t.Fatal(err)
		}
		before := e.counter.count("GET blob")
		bp, err := r.Blueprint(ctx, cv.Root, ResourceRef{Name: "blueprint"})
		if err != nil || !strings.Contains(bp.Files["blueprint.yaml"], "on disk") {
			t.Fatalf("round %d: %v %v", round, bp, err)
		}
		fetched := e.counter.count("GET blob") - before
		if round == 0 && fetched != 1 {
			t.Errorf("first process fetched the blueprint blob %d times", fetched)
		}
		if round == 1 && fetched != 0 {
			t.Errorf("after a restart the blueprint was fetched %d times, want 0 (from disk)", fetched)
		}
	}
	if _, err := os.Stat(dir + "/" + digest.FromBytes(archive).Encoded()); err != nil {
		t.Errorf("the archive is not on disk by its digest: %v", err)
	}
}

func TestDiskCacheEvictsAndDropsCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	d, err := newDiskCache(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	a, b := []byte("aaaaaa"), []byte("bbbbbb")
	d.put(digest.FromBytes(a), a)
	d.put(digest.FromBytes(b), b)
	if _, ok := d.get(digest.FromBytes(a)); ok {
		t.Error("a was kept beyond the disk budget")
	}
	if _, err := os.Stat(dir + "/" + digest.FromBytes(a).Encoded()); !os.IsNotExist(err) {
		t.Errorf("the evicted file is still on disk: %v", err)
	}
	if err := os.WriteFile(dir+"/"+digest.FromBytes(b).Encoded(), []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.get(digest.FromBytes(b)); ok {
		t.Error("a file that no longer matches its digest was served")
	}
	d.put(digest.FromBytes(a), []byte("not a's content"))
	if _, ok := d.get(digest.FromBytes(a)); ok {
		t.Error("content was stored under a digest it does not match")
	}
}
