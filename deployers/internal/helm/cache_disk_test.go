package helm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestDiskCacheSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	first, err := openDiskCache(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	c := newChartCache(100)
	c.disk = first
	digest := c.put([]byte("chart"))

	again, err := openDiskCache(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	restarted := newChartCache(100)
	restarted.disk = again
	data, ok := restarted.get(digest)
	if !ok || string(data) != "chart" {
		t.Fatalf("after a restart: %q, %v", data, ok)
	}
	if _, inMemory := restarted.archive[digest]; !inMemory {
		t.Error("an archive read from disk is not kept in memory")
	}
}

func TestDiskCacheDropsDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	d, err := openDiskCache(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	digest := archiveDigest([]byte("chart"))
	d.put(digest, []byte("chart"))
	if err := os.WriteFile(d.path(digest), []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.get(digest); ok {
		t.Error("a file whose content is not its digest was served")
	}
	if _, err := os.Stat(d.path(digest)); !os.IsNotExist(err) {
		t.Errorf("the damaged file stayed: %v", err)
	}
}

func TestDiskCacheBounded(t *testing.T) {
	dir := t.TempDir()
	d, err := openDiskCache(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	d.now = func() time.Time { now = now.Add(time.Second); return now }
	a, b := bytes.Repeat([]byte("a"), 6), bytes.Repeat([]byte("b"), 6)
	d.put(archiveDigest(a), a)
	d.put(archiveDigest(b), b) // 12 bytes > 10: a leaves
	if _, err := os.Stat(d.path(archiveDigest(a))); !os.IsNotExist(err) {
		t.Errorf("the least recently used file stayed: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"+diskCacheSuffix))
	if len(files) != 1 || d.used != 6 {
		t.Errorf("files %v, used %d", files, d.used)
	}
	// A smaller bound at start removes what is over it.
	if d, err = openDiskCache(dir, 5); err != nil || d.used != 0 {
		t.Errorf("reopened with a smaller bound: used %d, %v", d.used, err)
	}
}
