package tmpl

import (
	"encoding/json"
	"fmt"
	"reflect"
	"unicode/utf8"
	"unsafe"
)

// fromJson and mustFromJson (encoding/json into an any) allocate, while they
// run, more than the value they return takes: the text copied to bytes, every
// list grown by appending (its slots allocated five or six times over as it
// grows), numbers boxed, strings unquoted. Their result is charged
// decodedSize after the call (budget.go), but the call ran first, however
// little of the budget was left: 1 MiB of `{"":1},` (what one template can
// build) allocated 66 MB, more than the whole budget, and kept 53 MB; 300 000
// numbers allocated 31 MB and kept 7.6 MB. So before the call, what it will
// allocate is estimated from the text and held from the render's budget, like
// fromYaml's (yaml.go), and given back when it returns.
//
// The factors are the most TotalAlloc grew per unit in
// TestJSONAllowancesCoverAllocations (Go 1.26, texts of about MaxStringBytes,
// lists at the lengths whose last element makes them grow), rounded up; that
// test fails if an allowance falls below what a call allocated.
const (
	// Per byte of text: its copy, and strings unquoted: 2.0 a byte of a
	// long string, 2.5 with escapes, and 5.0 when a single byte of invalid
	// UTF-8 (written out as the 3 bytes of U+FFFD) makes the buffer grow.
	fromJSONByteBytes = 6
	// Per byte of invalid UTF-8 in a string, more: 11.0 a byte in all for
	// a string of them, 10.0 when just over half its bytes are.
	fromJSONInvalidBytes = 10
	// Per value, counted as each '[', '{', ',' and ':' outside strings,
	// and one: the list slot grown by appending and the boxed number, 109
	// for `1,` (at a length where the list just grew) and 134 for `"\n",`.
	fromJSONValueBytes = 128
	// Per object ('{'), more: a map's header and its first group of
	// slots; 378 a level of `{"":{"":...}}` in all, 448 for `{"":1},`.
	fromJSONObjectBytes = 160
)

// checkFromJSON holds what decoding fromJson's text takes. Text that is not
// JSON is not held for: encoding/json checks the whole text before it
// decodes anything, and fromJson returns nil for it. (It is checked only
// when the allowance does not fit, and without copying it: json.Valid only
// reads it.)
func checkFromJSON(b *budget, name string, args []reflect.Value) error {
	s := args[0].String()
	n, what := fromJSONCost(s)
	if n > b.left && !json.Valid(unsafe.Slice(unsafe.StringData(s), len(s))) {
		return nil
	}
	return b.hold(name, what, n)
}

// fromJSONCost is what decoding s allocates, at most. It counts, outside
// the strings of s, the values and objects decoding it makes (every value
// but the first follows a '[', ',' or ':'; '{' is counted as a value too,
// which covers the key before its first ':'), and inside them the bytes of
// invalid UTF-8. It follows JSON's strings exactly (a backslash escapes the
// next byte); for text that is not JSON the count does not matter (see
// checkFromJSON).
func fromJSONCost(s string) (int64, string) {
	values, objects, invalid := int64(1), int64(0), int64(0)
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			switch {
			case c == '\\':
				i++
			case c == '"':
				inString = false
			case c >= utf8.RuneSelf:
				r, size := utf8.DecodeRuneInString(s[i:])
				if r == utf8.RuneError && size == 1 {
					invalid++
				}
				i += size - 1
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{':
			objects++
			values++
		case '[', ',', ':':
			values++
		}
	}
	cost := satAdd(satAdd(sat(int64(len(s)), fromJSONByteBytes), sat(invalid, fromJSONInvalidBytes)),
		satAdd(sat(values, fromJSONValueBytes), sat(objects, fromJSONObjectBytes)))
	what := fmt.Sprintf("%d bytes of JSON, up to %d values and %d objects", len(s), values, objects)
	if invalid > 0 {
		what += fmt.Sprintf(", %d bytes of invalid UTF-8", invalid)
	}
	return cost, what
}
