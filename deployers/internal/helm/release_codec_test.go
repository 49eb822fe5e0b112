package helm

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/release"
)

func codecRelease() *release.Release {
	return &release.Release{
		Name: "demo", Namespace: "ns", Version: 3,
		Info:     &release.Info{Status: release.StatusDeployed},
		Manifest: strings.Repeat("apiVersion: v1\nkind: ConfigMap\n---\n", 200),
	}
}

// TestRecordCodecReadsHelmsFormats decodes what encodeRecord writes, a
// record gzip-compressed at another level, and an uncompressed record (the
// oldest Helm 3 records).
func TestRecordCodecReadsHelmsFormats(t *testing.T) {
	want := codecRelease()
	raw, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var fast bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&fast, gzip.BestSpeed)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	ours, err := encodeRecord(want)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"ours":      ours,
		"BestSpeed": []byte(base64.StdEncoding.EncodeToString(fast.Bytes())),
		"plain":     []byte(base64.StdEncoding.EncodeToString(raw)),
	} {
		got, err := decodeRecord(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Name != want.Name || got.Version != want.Version || got.Manifest != want.Manifest || got.Info.Status != want.Info.Status {
			t.Errorf("%s: decoded %s v%d %s, want %s v%d %s", name, got.Name, got.Version, got.Info.Status, want.Name, want.Version, want.Info.Status)
		}
	}
	for _, bad := range []string{"", "not base64!", base64.StdEncoding.EncodeToString([]byte{0x1f, 0x8b, 0x08, 0})} {
		if _, err := decodeRecord([]byte(bad)); err == nil {
			t.Errorf("decodeRecord(%q): no error", bad)
		}
	}
}

// TestRecordEncodingReusesCompressors: a gzip compressor holds over a
// megabyte of state; writing records must not allocate one per record.
func TestRecordEncodingReusesCompressors(t *testing.T) {
	rel := codecRelease()
	if _, err := encodeRecord(rel); err != nil {
		t.Fatal(err)
	}
	const records = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range records {
		if _, err := encodeRecord(rel); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	// A GC empties the pool now and then; a fresh compressor each time
	// would be over 1 MiB per record.
	const limit = 256 << 10
	if per := (after.TotalAlloc - before.TotalAlloc) / records; per > limit {
		t.Errorf("encoding a record allocated %d bytes on average, want at most %d", per, limit)
	}
}
