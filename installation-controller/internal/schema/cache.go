package schema

import (
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// Bounds on the cache of compiled schema sets: a blueprint's schemas are
// compiled once and found again by the hash of what they were compiled
// from, by every reconcile of every installation using that blueprint.
const (
	// CacheEntries is how many compiled sets the cache keeps.
	CacheEntries = 256
	// CacheBytes is how much schema text (fields and local types as
	// JSON, and the files they refer to) the kept sets were compiled from
	// in all.
	CacheBytes = 16 << 20
)

type cacheEntry struct {
	key  [sha256.Size]byte
	set  *Set
	size int64
}

// cache is a least-recently-used cache of compiled sets.
type cache struct {
	mu    sync.Mutex
	order *list.List // front: most recently used
	byKey map[[sha256.Size]byte]*list.Element
	bytes int64
}

var sets = &cache{order: list.New(), byKey: map[[sha256.Size]byte]*list.Element{}}

// compilations counts the sets compiled (the cache's misses).
var compilations atomic.Int64

// Compilations returns how many schema sets this process compiled: a
// blueprint whose schemas are validated many times is compiled once.
func Compilations() int64 { return compilations.Load() }

// Compile returns doc's compiled schemas, from the cache when doc was
// compiled before. A field whose schema does not compile is an error of that
// field's Validate; the error returned here is doc's own (not JSON).
func Compile(doc Document) (*Set, error) {
	src, err := json.Marshal(struct {
		Fields     map[string]any `json:"f"`
		LocalTypes map[string]any `json:"l"`
		Draft      string         `json:"d,omitempty"`
	}{doc.Fields, doc.LocalTypes, doc.DefaultDraft})
	if err != nil {
		return nil, fmt.Errorf("schemas are not JSON: %w", err)
	}
	h := sha256.New()
	h.Write(src)
	for _, name := range slices.Sorted(maps.Keys(doc.Files)) {
		// Length-prefixed, so that no two filesystems hash alike.
		_, _ = fmt.Fprintf(h, "\x00%d:%s%d:", len(name), name, len(doc.Files[name])) // a hash never fails
		h.Write([]byte(doc.Files[name]))
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	if set := sets.get(key); set != nil {
		return set, nil
	}
	compilations.Add(1)
	set, fileBytes := compile(doc)
	sets.put(key, set, int64(len(src))+fileBytes)
	return set, nil
}

func (c *cache) get(key [sha256.Size]byte) *Set {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).set
}

// put keeps set unless it alone is larger than CacheBytes, dropping the
// least recently used sets beyond the bounds.
func (c *cache) put(key [sha256.Size]byte, set *Set, size int64) {
	if size > CacheBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		return
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key: key, set: set, size: size})
	c.bytes += size
	for c.order.Len() > CacheEntries || c.bytes > CacheBytes {
		last := c.order.Back()
		e := last.Value.(*cacheEntry)
		c.order.Remove(last)
		delete(c.byKey, e.key)
		c.bytes -= e.size
	}
}
