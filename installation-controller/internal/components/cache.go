package components

import (
	"container/list"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
)

// memoryCache is a least-recently-used cache bounded by the sizes its
// entries are charged. An entry larger than the whole budget is not kept.
type memoryCache struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	order   *list.List // front: most recently used
	entries map[string]*list.Element
	// onEvict, when set, is told of every entry that leaves the cache.
	onEvict func(key string)
}

type cacheEntry struct {
	key   string
	value any
	size  int64
}

func newMemoryCache(budget int64) *memoryCache {
	return &memoryCache{budget: budget, order: list.New(), entries: map[string]*list.Element{}}
}

func (c *memoryCache) get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).value, true
}

func (c *memoryCache) put(key string, value any, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		// Replaced, not evicted: what onEvict cleans up is the new value's.
		old := el.Value.(*cacheEntry)
		c.order.Remove(el)
		delete(c.entries, key)
		c.used -= old.size
	}
	if size > c.budget {
		if c.onEvict != nil {
			c.onEvict(key)
		}
		return
	}
	for c.used+size > c.budget {
		c.remove(c.order.Back())
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, value: value, size: size})
	c.used += size
}

func (c *memoryCache) delete(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
}

func (c *memoryCache) remove(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.order.Remove(el)
	delete(c.entries, e.key)
	c.used -= e.size
	if c.onEvict != nil {
		c.onEvict(e.key)
	}
}

// partialPrefix names files being written to the disk cache.
const partialPrefix = ".partial-"

// diskCache keeps blobs as files named by their digest, bounded in bytes;
// the least recently used go first. A file whose content no longer matches
// its name is dropped on read.
type diskCache struct {
	dir   string
	index *memoryCache // digest → nil, charged the file's size
	mu    sync.Mutex
}

// newDiskCache opens dir, creating it, and indexes the files already there,
// oldest first, so that a restart keeps the newest within budget.
func newDiskCache(dir string, budget int64) (*diskCache, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	d := &diskCache{dir: dir, index: newMemoryCache(budget)}
	d.index.onEvict = func(key string) { _ = os.Remove(d.path(digest.Digest(key))) }
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type found struct {
		name string
		size int64
		mod  int64
	}
	var files []found
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), partialPrefix) {
			_ = os.Remove(filepath.Join(dir, e.Name())) // a write a crash cut short
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || digest.Digest("sha256:"+e.Name()).Validate() != nil {
			continue
		}
		files = append(files, found{e.Name(), info.Size(), info.ModTime().UnixNano()})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod < files[j].mod })
	for _, f := range files {
		d.admit("sha256:"+f.name, f.size)
	}
	return d, nil
}

func (d *diskCache) path(dg digest.Digest) string {
	return filepath.Join(d.dir, dg.Encoded())
}

// admit indexes a file; the index deletes the files it evicts.
func (d *diskCache) admit(key string, size int64) {
	d.index.put(key, nil, size)
}

func (d *diskCache) get(dg digest.Digest) ([]byte, bool) {
	if dg.Algorithm() != digest.SHA256 || dg.Validate() != nil {
		return nil, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.index.get(dg.String()); !ok {
		return nil, false
	}
	data, err := os.ReadFile(d.path(dg))
	if err != nil || digest.FromBytes(data) != dg {
		d.index.delete(dg.String())
		return nil, false
	}
	return data, true
}

func (d *diskCache) put(dg digest.Digest, data []byte) {
	if dg.Algorithm() != digest.SHA256 || digest.FromBytes(data) != dg {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	tmp, err := os.CreateTemp(d.dir, partialPrefix+"*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), d.path(dg)) != nil {
		_ = os.Remove(tmp.Name())
		return
	}
	d.admit(dg.String(), int64(len(data)))
}
