package helm

import (
	"bytes"
	"testing"
	"time"
)

func TestChartCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newChartCache(10)
	a, b, d := bytes.Repeat([]byte("a"), 4), bytes.Repeat([]byte("b"), 4), bytes.Repeat([]byte("d"), 4)
	da, db := c.put(a), c.put(b)
	if _, ok := c.get(da); !ok { // a is now the most recently used
		t.Fatal("a not cached")
	}
	dd := c.put(d) // 12 bytes > 10: b, the least recently used, leaves
	if _, ok := c.get(db); ok {
		t.Error("b stayed although the cache is over its bound")
	}
	for name, digest := range map[string]string{"a": da, "d": dd} {
		if _, ok := c.get(digest); !ok {
			t.Errorf("%s left the cache", name)
		}
	}
	if c.used != 8 {
		t.Errorf("used = %d, want 8", c.used)
	}
}

func TestChartCacheKeepsNothingLargerThanItself(t *testing.T) {
	c := newChartCache(3)
	d := c.put([]byte("four"))
	if _, ok := c.get(d); ok || c.used != 0 {
		t.Errorf("an archive larger than the cache was kept (used %d)", c.used)
	}
	if d != archiveDigest([]byte("four")) {
		t.Errorf("digest %s", d)
	}
}

func TestChartCacheAliasExpires(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newChartCache(100)
	c.now = func() time.Time { return now }
	c.remember("url x", c.put([]byte("chart")), time.Minute)
	c.remember("manifest y", archiveDigest([]byte("chart")), 0)
	if _, ok := c.lookup("url x"); !ok {
		t.Fatal("alias not found before it expires")
	}
	now = now.Add(2 * time.Minute)
	if _, ok := c.lookup("url x"); ok {
		t.Error("alias found after it expired")
	}
	if _, ok := c.lookup("manifest y"); !ok {
		t.Error("an alias without ttl expired")
	}
}

func TestChartCacheAliasesBounded(t *testing.T) {
	c := newChartCache(100)
	digest := c.put([]byte("chart"))
	for i := range maxCacheAliases + 10 {
		c.remember(string(rune(i))+" name", digest, 0)
	}
	if len(c.aliases) > maxCacheAliases {
		t.Errorf("%d aliases, bound %d", len(c.aliases), maxCacheAliases)
	}
}
