package helm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// diskCache keeps chart archives as files named by their digest in one
// directory, within a byte budget, least recently used out. It is the
// chart cache's second level: an archive survives a restart of the
// deployer, and a cache larger than its memory costs disk only. Files are
// checked against their name when read, so a damaged one is a miss.
type diskCache struct {
	mu    sync.Mutex
	dir   string
	limit int64
	used  int64
	files map[string]*diskFile // by digest
	now   func() time.Time
}

type diskFile struct {
	size int64
	used time.Time
}

const diskCacheSuffix = ".tgz"

// openDiskCache creates dir if needed and takes stock of the archives in
// it, dropping what is over limit.
func openDiskCache(dir string, limit int64) (*diskCache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("chart cache directory (--chart-cache-dir): %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("chart cache directory (--chart-cache-dir): %w", err)
	}
	d := &diskCache{dir: dir, limit: limit, files: map[string]*diskFile{}, now: time.Now}
	for _, e := range entries {
		hex, ok := strings.CutSuffix(e.Name(), diskCacheSuffix)
		info, err := e.Info()
		if !ok || err != nil || !info.Mode().IsRegular() {
			continue
		}
		d.files["sha256:"+hex] = &diskFile{size: info.Size(), used: info.ModTime()}
		d.used += info.Size()
	}
	d.mu.Lock()
	d.evict(0)
	d.mu.Unlock()
	return d, nil
}

func (d *diskCache) path(digest string) string {
	return filepath.Join(d.dir, strings.TrimPrefix(digest, "sha256:")+diskCacheSuffix)
}

// get reads the archive of digest; a file whose content is not its digest
// is removed.
func (d *diskCache) get(digest string) ([]byte, bool) {
	d.mu.Lock()
	f, ok := d.files[digest]
	if ok {
		f.used = d.now()
	}
	d.mu.Unlock()
	if !ok {
		return nil, false
	}
	data, err := os.ReadFile(d.path(digest))
	if err != nil || archiveDigest(data) != digest {
		d.remove(digest)
		return nil, false
	}
	return data, true
}

// put writes data under digest (a rename, so a reader never sees half a
// file). A failed write leaves the archive uncached.
func (d *diskCache) put(digest string, data []byte) {
	size := int64(len(data))
	d.mu.Lock()
	_, known := d.files[digest]
	if known || size > d.limit {
		d.mu.Unlock()
		return
	}
	d.evict(size)
	d.mu.Unlock()
	tmp, err := os.CreateTemp(d.dir, ".partial-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), d.path(digest)) != nil {
		_ = os.Remove(tmp.Name())
		return
	}
	d.mu.Lock()
	if _, ok := d.files[digest]; !ok {
		d.files[digest] = &diskFile{size: size, used: d.now()}
		d.used += size
	}
	d.mu.Unlock()
}

// evict removes the least recently used files until room bytes fit.
// Callers hold d.mu.
func (d *diskCache) evict(room int64) {
	for d.used+room > d.limit && len(d.files) > 0 {
		var oldest string
		for digest, f := range d.files {
			if oldest == "" || f.used.Before(d.files[oldest].used) {
				oldest = digest
			}
		}
		d.used -= d.files[oldest].size
		delete(d.files, oldest)
		_ = os.Remove(d.path(oldest))
	}
}

func (d *diskCache) remove(digest string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.files[digest]; ok {
		d.used -= f.size
		delete(d.files, digest)
	}
	_ = os.Remove(d.path(digest))
}
