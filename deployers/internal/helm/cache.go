package helm

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// maxCacheAliases bounds the names (OCI manifest digests, chart URLs) the
// chart cache remembers; each is a few hundred bytes at most.
const maxCacheAliases = 4096

// chartCache keeps chart archives in memory, least recently used first
// out, keyed by the sha256 digest of the archive ("sha256:<hex>"). It
// shares only content: the names that lead to a digest (aliases) are
// looked up by each item with its own credentials.
type chartCache struct {
	mu      sync.Mutex
	limit   int64
	used    int64
	order   *list.List // of *cachedArchive, most recently used first
	archive map[string]*list.Element
	aliases map[string]cacheAlias
	now     func() time.Time
	// disk is the second level (--chart-cache-dir), or nil.
	disk *diskCache
}

type cachedArchive struct {
	digest string
	data   []byte
}

type cacheAlias struct {
	digest  string
	expires time.Time // zero: never
}

func newChartCache(limit int64) *chartCache {
	return &chartCache{limit: limit, order: list.New(), archive: map[string]*list.Element{}, aliases: map[string]cacheAlias{}, now: time.Now}
}

// archiveDigest is the digest an archive is cached under.
func archiveDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// get returns the archive of digest, if cached in memory or on disk.
func (c *chartCache) get(digest string) ([]byte, bool) {
	c.mu.Lock()
	e, ok := c.archive[digest]
	if ok {
		c.order.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*cachedArchive).data, true
	}
	c.mu.Unlock()
	if c.disk == nil {
		return nil, false
	}
	data, ok := c.disk.get(digest)
	if ok {
		c.putMemory(digest, data)
	}
	return data, ok
}

// put caches data and returns its digest; an archive larger than the
// whole cache is not kept.
func (c *chartCache) put(data []byte) string {
	digest := archiveDigest(data)
	c.putMemory(digest, data)
	if c.disk != nil {
		c.disk.put(digest, data)
	}
	return digest
}

func (c *chartCache) putMemory(digest string, data []byte) {
	size := int64(len(data))
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.archive[digest]; ok {
		c.order.MoveToFront(e)
		return
	}
	if size > c.limit {
		return
	}
	for c.used+size > c.limit {
		oldest := c.order.Back()
		a := oldest.Value.(*cachedArchive)
		c.order.Remove(oldest)
		delete(c.archive, a.digest)
		c.used -= int64(len(a.data))
	}
	c.archive[digest] = c.order.PushFront(&cachedArchive{digest: digest, data: data})
	c.used += size
}

// lookup returns the archive a name led to, if the name is remembered,
// not expired, and its archive still cached.
func (c *chartCache) lookup(name string) ([]byte, bool) {
	c.mu.Lock()
	a, ok := c.aliases[name]
	if ok && !a.expires.IsZero() && c.now().After(a.expires) {
		delete(c.aliases, name)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	return c.get(a.digest)
}

// remember makes name lead to digest, for ttl (zero: as long as there is room).
func (c *chartCache) remember(name, digest string, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.aliases[name]; !ok && len(c.aliases) >= maxCacheAliases {
		c.pruneAliases()
	}
	a := cacheAlias{digest: digest}
	if ttl > 0 {
		a.expires = c.now().Add(ttl)
	}
	c.aliases[name] = a
}

// pruneAliases drops the expired aliases and those whose archive is gone;
// if that frees nothing, all of them (they are only shortcuts).
func (c *chartCache) pruneAliases() {
	now := c.now()
	for name, a := range c.aliases {
		if _, cached := c.archive[a.digest]; !cached || (!a.expires.IsZero() && now.After(a.expires)) {
			delete(c.aliases, name)
		}
	}
	if len(c.aliases) >= maxCacheAliases {
		clear(c.aliases)
	}
}
