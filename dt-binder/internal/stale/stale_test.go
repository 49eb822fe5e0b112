package stale

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestVersions(t *testing.T) {
	var v Versions
	key := types.NamespacedName{Namespace: "ns", Name: "c"}
	if v.Stale(key, "1") {
		t.Fatal("nothing written: not stale")
	}
	// One reconcile wrote metadata (1 -> 2) and status (2 -> 3).
	v.Replaced(key, "1")
	v.Replaced(key, "2")
	for _, rv := range []string{"1", "2"} {
		if !v.Stale(key, rv) {
			t.Fatalf("version %s is older than the last write", rv)
		}
	}
	if v.Stale(key, "3") {
		t.Fatal("the written version is not stale")
	}
	// Seeing a newer copy drops the record.
	if v.Stale(key, "1") {
		t.Fatal("record not dropped after a newer copy was seen")
	}
	v.Replaced(key, "5")
	v.Forget(key)
	if v.Stale(key, "5") {
		t.Fatal("forgotten")
	}
	v.Replaced(key, "")
	if v.Stale(key, "") {
		t.Fatal("empty versions are not recorded")
	}
}
