package tmpl

import (
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"unicode/utf8"
)

// splitPartBytes is what sprig's split and splitn allocate per part: the
// slice strings.Split returns (16 bytes a part), the key ("_" and the
// index, 8 bytes) and the map's slot and its share of the table (measured:
// 70 to 116 bytes a part from ten to a million parts). The budget would only
// see the map's key and value slots (32 bytes): a 1 MiB string split at
// every byte took 116 MB, charged 32.
const splitPartBytes = 120

// dedupEntryBytes is what uniq and without allocate per element beyond
// their result: the hash table (a uint64 key and an int32 index per
// distinct element, with its growth) and the chain of equal hashes.
const dedupEntryBytes = 48

// deadlineEvery is how many elements uniq, without and has look at between
// two checks of the render's deadline.
const deadlineEvery = 256

// reserve charges n bytes that function fn is about to allocate beyond what
// its result shows to resultSize (a map's table, a temporary index), before
// it allocates them.
func (b *budget) reserve(fn string, n int64) error {
	if n > b.left {
		return fmt.Errorf("%s would take %d bytes, more than the %d left of the template's budget of %d bytes", fn, n, max(b.left, 0), MaxRenderBytes)
	}
	b.left -= n
	return b.backed(fn)
}

// splitParts is the number of parts strings.SplitN(s, sep, n) returns,
// counted without building them.
func splitParts(sep, s string, n int) int64 {
	if n == 0 {
		return 0
	}
	var parts int64
	if sep == "" {
		parts = int64(utf8.RuneCountInString(s))
	} else {
		parts = int64(strings.Count(s, sep)) + 1
	}
	if n > 0 {
		parts = min(parts, int64(n))
	}
	return parts
}

// boundLists replaces, in f, sprig's split and splitn, whose maps cost
// several times what the budget sees, with versions that charge their real
// size first; and uniq, without and has (and their must variants), which
// compare every element with every other (uniq over 10 000 numbers took
// 2.4 s in one call, over the 500 000 parts of a split string it would take
// hours, and the render's deadline is only checked between calls), with
// versions that find equal elements through a hash and check the deadline
// as they go. Their results are sprig's: reflect.DeepEqual decides equality,
// the hash only says which elements to compare.
func boundLists(f template.FuncMap, b *budget) {
	splitn := func(name, sep string, n int, orig string) (map[string]string, error) {
		// The map's key and value slots (32 bytes a part) are charged
		// with the result (resultSize), the rest here, before it is built.
		if err := b.reserve(name, sat(splitParts(sep, orig, n), splitPartBytes-32)); err != nil {
			return nil, err
		}
		parts := strings.SplitN(orig, sep, n)
		res := make(map[string]string, len(parts))
		for i, v := range parts {
			res["_"+strconv.Itoa(i)] = v
		}
		return res, nil
	}
	f["split"] = func(sep, orig string) (map[string]string, error) { return splitn("split", sep, -1, orig) }
	f["splitn"] = func(sep string, n int, orig string) (map[string]string, error) { return splitn("splitn", sep, n, orig) }

	uniq := func(name string) func(list any) ([]any, error) {
		return func(list any) ([]any, error) {
			v := reflect.ValueOf(list)
			if k := v.Kind(); k != reflect.Slice && k != reflect.Array {
				return nil, notAList("uniq", k)
			}
			if err := b.reserve(name, sat(int64(v.Len()), dedupEntryBytes)); err != nil {
				return nil, err
			}
			set := newValueSet()
			dest := []any{}
			for i := range v.Len() {
				if i%deadlineEvery == 0 {
					if err := b.checkTime(); err != nil {
						return nil, err
					}
				}
				item := v.Index(i).Interface()
				if set.add(item) {
					dest = append(dest, item)
				}
			}
			return dest, nil
		}
	}
	f["uniq"], f["mustUniq"] = uniq("uniq"), uniq("mustUniq")

	without := func(name string) func(list any, omit ...any) ([]any, error) {
		return func(list any, omit ...any) ([]any, error) {
			v := reflect.ValueOf(list)
			if k := v.Kind(); k != reflect.Slice && k != reflect.Array {
				return nil, notAList("without", k)
			}
			if err := b.reserve(name, sat(int64(len(omit)), dedupEntryBytes)); err != nil {
				return nil, err
			}
			set := newValueSet()
			for i, o := range omit {
				if i%deadlineEvery == 0 {
					if err := b.checkTime(); err != nil {
						return nil, err
					}
				}
				set.add(o)
			}
			res := []any{}
			for i := range v.Len() {
				if i%deadlineEvery == 0 {
					if err := b.checkTime(); err != nil {
						return nil, err
					}
				}
				item := v.Index(i).Interface()
				if !set.has(item) {
					res = append(res, item)
				}
			}
			return res, nil
		}
	}
	f["without"], f["mustWithout"] = without("without"), without("mustWithout")

	// has compares the needle with each element once: its arguments are
	// measured first (traversingFuncs), which bounds that work; the
	// deadline is checked as it goes.
	has := func(needle, haystack any) (bool, error) {
		if haystack == nil {
			return false, nil
		}
		v := reflect.ValueOf(haystack)
		if k := v.Kind(); k != reflect.Slice && k != reflect.Array {
			return false, notAList("has", k)
		}
		for i := range v.Len() {
			if i%deadlineEvery == 0 {
				if err := b.checkTime(); err != nil {
					return false, err
				}
			}
			if reflect.DeepEqual(needle, v.Index(i).Interface()) {
				return true, nil
			}
		}
		return false, nil
	}
	f["has"], f["mustHas"] = has, has
}

// notAList is sprig's error for a list argument that is none, word for word.
func notAList(fn string, k reflect.Kind) error {
	return fmt.Errorf("Cannot find %s on type %s", fn, k) //nolint:staticcheck // sprig's message, kept as it is
}

// deepEqual decides equality of elements, as sprig does; a variable so that
// a test can count the comparisons a call makes.
var deepEqual = reflect.DeepEqual

// valueSet holds distinct values (by reflect.DeepEqual), found by a hash
// that DeepEqual values share (valueHasher): an element is compared only
// with the values of its hash, so a set of n values costs one hash of each
// and about one comparison per equal element, not n² comparisons.
type valueSet struct {
	h      valueHasher
	first  map[uint64]int32 // hash → index in values of the first value with it
	next   []int32          // index → the next value with the same hash, -1 if none
	values []any
}

func newValueSet() *valueSet {
	return &valueSet{h: valueHasher{seed: hashSeed, key: hashKey}, first: map[uint64]int32{}}
}

// find returns the hash of v and whether an equal value is in the set.
func (s *valueSet) find(v any) (uint64, bool) {
	h := s.h.hash(reflect.ValueOf(v), 0)
	i, ok := s.first[h]
	for ok && i >= 0 {
		if deepEqual(v, s.values[i]) {
			return h, true
		}
		i = s.next[i]
	}
	return h, false
}

func (s *valueSet) has(v any) bool {
	_, found := s.find(v)
	return found
}

// add adds v and reports whether it was new.
func (s *valueSet) add(v any) bool {
	h, found := s.find(v)
	if found {
		return false
	}
	i := int32(len(s.values))
	prev, ok := s.first[h]
	if !ok {
		prev = -1
	}
	// Newest first in the chain: any order finds an equal value.
	s.first[h] = i
	s.next = append(s.next, prev)
	s.values = append(s.values, v)
	return true
}

// The hash is keyed per process, so a template cannot choose values whose
// hashes collide (which would bring back the comparisons of every element
// with every other).
var (
	hashSeed = maphash.MakeSeed()
	hashKey  = maphash.String(hashSeed, "terrace") | 1
)

// valueHasher hashes values so that values reflect.DeepEqual finds equal
// hash equal: by content, maps independent of their order, -0.0 as 0.0.
// DeepEqual takes a list, map or pointer to be equal to itself without
// looking inside, so a NaN (never equal to anything, itself included) is
// equal inside a list shared by both sides: it is hashed by the address of
// the nearest enclosing list, map or pointer (ref), which both sides share
// then. A NaN outside any gets a hash of its own, as it equals nothing.
// Values passed here were measured (traversingFuncs): no cycles, at most
// maxDepth levels.
type valueHasher struct {
	seed maphash.Seed
	key  uint64
	nans uint64
}

// mix combines two hashes (the finalizer of MurmurHash3, keyed).
func (h *valueHasher) mix(a, b uint64) uint64 {
	x := bits.RotateLeft64(a, 29)*0x9e3779b97f4a7c15 ^ b ^ h.key
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

func (h *valueHasher) float(f float64, ref uintptr) uint64 {
	switch {
	case math.IsNaN(f):
		if ref == 0 {
			h.nans++
			return h.mix(uint64(reflect.Float64)<<32|0xdead, h.nans)
		}
		return h.mix(0xdead, uint64(ref))
	case f == 0:
		f = 0 // -0.0 == 0.0
	}
	return h.mix(uint64(reflect.Float64), math.Float64bits(f))
}

func (h *valueHasher) hash(v reflect.Value, ref uintptr) uint64 {
	k := v.Kind()
	tag := uint64(k)
	switch k {
	case reflect.Invalid:
		return h.mix(0, 0)
	case reflect.Interface:
		if v.IsNil() {
			return h.mix(0, 0)
		}
		return h.hash(v.Elem(), ref)
	case reflect.Pointer:
		if v.IsNil() {
			return h.mix(tag, 0)
		}
		return h.mix(tag, h.hash(v.Elem(), v.Pointer()))
	case reflect.Bool:
		if v.Bool() {
			return h.mix(tag, 1)
		}
		return h.mix(tag, 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return h.mix(tag, uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return h.mix(tag, v.Uint())
	case reflect.Float32, reflect.Float64:
		return h.float(v.Float(), ref)
	case reflect.Complex64, reflect.Complex128:
		c := v.Complex()
		return h.mix(h.float(real(c), ref), h.float(imag(c), ref))
	case reflect.String:
		return h.mix(tag, maphash.String(h.seed, v.String()))
	case reflect.Slice:
		if v.IsNil() {
			return h.mix(tag, 0)
		}
		if isBytes(v) {
			return h.mix(tag, maphash.Bytes(h.seed, v.Bytes()))
		}
		inner := v.Pointer()
		x := h.mix(tag, uint64(v.Len())+1)
		for i := range v.Len() {
			x = h.mix(x, h.hash(v.Index(i), inner))
		}
		return x
	case reflect.Array:
		x := h.mix(tag, uint64(v.Len()))
		for i := range v.Len() {
			x = h.mix(x, h.hash(v.Index(i), ref))
		}
		return x
	case reflect.Map:
		if v.IsNil() {
			return h.mix(tag, 0)
		}
		inner := v.Pointer()
		// A sum of the entries' hashes: the same whatever order the
		// map is walked in.
		var sum uint64
		it := v.MapRange()
		for it.Next() {
			sum += h.mix(h.hash(it.Key(), inner), h.hash(it.Value(), inner))
		}
		return h.mix(h.mix(tag, uint64(v.Len())+1), sum)
	case reflect.Struct:
		x := h.mix(tag, uint64(v.NumField()))
		for i := range v.NumField() {
			x = h.mix(x, h.hash(v.Field(i), ref))
		}
		return x
	}
	// Funcs, channels, unsafe pointers: DeepEqual compares them by
	// identity (funcs only when nil); they do not occur in template
	// values, so one hash for all is enough.
	return h.mix(tag, 0)
}
