package stale

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

var (
	keyA = types.NamespacedName{Namespace: "ns", Name: "a"}
	keyB = types.NamespacedName{Namespace: "ns", Name: "b"}
)

// op is one step of a table test: record rvs, or forget, then check stale
// and fresh versions.
type op struct {
	key      types.NamespacedName
	replaced []string
	forget   bool
	stale    []string
	fresh    []string
}

func TestVersions(t *testing.T) {
	tests := []struct {
		name string
		ops  []op
	}{{
		name: "nothing recorded: nothing is stale",
		ops:  []op{{key: keyA, fresh: []string{"1", ""}}},
	}, {
		name: "one reconcile wrote metadata (1 -> 2) and status (2 -> 3)",
		ops: []op{{
			key: keyA, replaced: []string{"1", "2"},
			stale: []string{"1", "2"}, fresh: []string{"3", "4"},
		}},
	}, {
		name: "replaced versions one call at a time",
		ops: []op{
			{key: keyA, replaced: []string{"1"}},
			{key: keyA, replaced: []string{"2"}, stale: []string{"1", "2"}, fresh: []string{"3"}},
		},
	}, {
		name: "seeing a newer copy keeps the record",
		ops: []op{
			{key: keyA, replaced: []string{"1", "2"}, fresh: []string{"3"}},
			{key: keyA, stale: []string{"1", "2"}},
		},
	}, {
		name: "keys are apart",
		ops: []op{
			{key: keyA, replaced: []string{"1"}},
			{key: keyB, replaced: []string{"7"}, stale: []string{"7"}, fresh: []string{"1"}},
			{key: keyA, stale: []string{"1"}, fresh: []string{"7"}},
		},
	}, {
		name: "forget drops only its key",
		ops: []op{
			{key: keyA, replaced: []string{"1"}},
			{key: keyB, replaced: []string{"1"}},
			{key: keyA, forget: true, fresh: []string{"1"}},
			{key: keyB, stale: []string{"1"}},
		},
	}, {
		name: "recording after forget starts afresh",
		ops: []op{
			{key: keyA, replaced: []string{"1", "2"}},
			{key: keyA, forget: true},
			{key: keyA, replaced: []string{"5"}, stale: []string{"5"}, fresh: []string{"1", "2"}},
		},
	}, {
		name: "empty versions are not recorded",
		ops:  []op{{key: keyA, replaced: []string{"", "1", ""}, stale: []string{"1"}, fresh: []string{""}}},
	}, {
		name: "a version recorded twice takes one place",
		ops: []op{
			{key: keyA, replaced: []string{"1", "1", "2", "2", "3", "1"}},
			{key: keyA, replaced: []string{"4"}, stale: []string{"1", "2", "3", "4"}},
		},
	}, {
		name: "opaque versions are not compared as numbers",
		ops: []op{{
			key: keyA, replaced: []string{"10", "9"},
			stale: []string{"10", "9"}, fresh: []string{"8", "11", "010"},
		}},
	}, {
		name: "the bound keeps the last Depth versions",
		ops: []op{
			{key: keyA, replaced: []string{"1", "2", "3", "4"}, stale: []string{"1", "2", "3", "4"}},
			{key: keyA, replaced: []string{"5"}, stale: []string{"2", "3", "4", "5"}, fresh: []string{"1"}},
			{key: keyA, replaced: []string{"6", "7", "8", "9", "10"}, stale: []string{"7", "8", "9", "10"}, fresh: []string{"2", "5", "6"}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v Versions
			for i, o := range tt.ops {
				if o.forget {
					v.Forget(o.key)
				}
				v.Replaced(o.key, o.replaced...)
				for _, rv := range o.stale {
					if !v.Stale(o.key, rv) {
						t.Errorf("step %d: %s at %q not stale", i, o.key, rv)
					}
				}
				for _, rv := range o.fresh {
					if v.Stale(o.key, rv) {
						t.Errorf("step %d: %s at %q stale", i, o.key, rv)
					}
				}
			}
		})
	}
}

func TestVersionsBound(t *testing.T) {
	var v Versions
	for i := range 1000 {
		v.Replaced(keyA, strconv.Itoa(i))
	}
	if got := len(v.m[keyA]); got != Depth {
		t.Fatalf("%d versions kept, want %d", got, Depth)
	}
	want := []string{"996", "997", "998", "999"}
	if !slices.Equal(v.m[keyA], want) {
		t.Fatalf("kept %v, want %v", v.m[keyA], want)
	}
}

func TestVersionsForgetUnknown(t *testing.T) {
	var v Versions
	v.Forget(keyA) // the zero value needs no Replaced first
	if v.Stale(keyA, "1") {
		t.Fatal("stale after forgetting an unknown key")
	}
}

// TestVersionsConcurrent exercises every method from several goroutines; run
// with -race.
func TestVersionsConcurrent(t *testing.T) {
	var v Versions
	const workers, rounds = 8, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			shared := types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(w % 3)}
			own := types.NamespacedName{Namespace: "own", Name: fmt.Sprint(w)}
			for i := range rounds {
				rv := fmt.Sprintf("%d-%d", w, i)
				v.Replaced(shared, rv)
				v.Stale(shared, rv)
				if i%50 == 0 {
					v.Forget(shared)
				}
				// Nobody else writes own: what was recorded is stale.
				v.Replaced(own, rv)
				if !v.Stale(own, rv) {
					t.Errorf("%s at %q not stale", own, rv)
				}
			}
		})
	}
	wg.Wait()
	for k, list := range v.m {
		if len(list) > Depth {
			t.Errorf("%s: %d versions kept, want at most %d", k, len(list), Depth)
		}
	}
}
