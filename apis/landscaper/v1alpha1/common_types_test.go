package v1alpha1

import (
	"encoding/json"
	"testing"
)

// AnyJSON must carry any JSON value through a round trip unchanged: DataObject
// values and data mappings are user data, and scalars and lists are as valid
// as objects.
func TestAnyJSONRoundTrip(t *testing.T) {
	for _, raw := range []string{`{"a":1,"b":[true,null]}`, `"text"`, `42`, `[1,2]`, `true`} {
		var obj DataObject
		if err := json.Unmarshal([]byte(`{"data":`+raw+`}`), &obj); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		out, err := json.Marshal(obj.Data)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != raw {
			t.Errorf("round trip of %s gave %s", raw, out)
		}
		if copied := obj.DeepCopy(); string(copied.Data.RawMessage) != raw {
			t.Errorf("deep copy of %s gave %s", raw, copied.Data.RawMessage)
		}
	}
}

func TestAnyJSONEmptyIsNull(t *testing.T) {
	out, err := json.Marshal(AnyJSON{})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "null" {
		t.Fatalf("empty AnyJSON marshalled to %s, want null", out)
	}
	var a AnyJSON
	if err := json.Unmarshal([]byte("null"), &a); err != nil || a.RawMessage != nil {
		t.Fatalf("null should unmarshal to empty, got %q (%v)", a.RawMessage, err)
	}
}

func TestPhaseFinality(t *testing.T) {
	cases := map[Phase]struct{ final, failed bool }{
		PhaseInit:            {},
		PhaseCleanupOrphaned: {},
		PhaseObjectsCreated:  {},
		PhaseProgressing:     {},
		PhaseCompleting:      {},
		PhaseInitDelete:      {},
		PhaseTriggerDelete:   {},
		PhaseDeleting:        {},
		PhaseSucceeded:       {final: true},
		PhaseFailed:          {final: true, failed: true},
		PhaseDeleteFailed:    {final: true, failed: true},
		"":                   {},
	}
	for p, want := range cases {
		if got := p.IsFinal(); got != want.final {
			t.Errorf("%q.IsFinal() = %v, want %v", p, got, want.final)
		}
		if got := p.IsFailed(); got != want.failed {
			t.Errorf("%q.IsFailed() = %v, want %v", p, got, want.failed)
		}
	}
}
