package helm

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
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
		got, err := decodeRecord(data, DefaultMaxReleaseRecordBytes)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Name != want.Name || got.Version != want.Version || got.Manifest != want.Manifest || got.Info.Status != want.Info.Status {
			t.Errorf("%s: decoded %s v%d %s, want %s v%d %s", name, got.Name, got.Version, got.Info.Status, want.Name, want.Version, want.Info.Status)
		}
	}
	for _, bad := range []string{"", "not base64!", base64.StdEncoding.EncodeToString([]byte{0x1f, 0x8b, 0x08, 0})} {
		if _, err := decodeRecord([]byte(bad), DefaultMaxReleaseRecordBytes); err == nil {
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

// recordBomb is the data of a record whose JSON inflates to inflated bytes
// of spaces from a few hundred KiB at most.
func recordBomb(t testing.TB, inflated int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for left := inflated; left > 0; left -= len(chunk) {
		if _, err := zw.Write(chunk[:min(left, len(chunk))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(buf.Bytes()))
}

// TestRecordDecodingStopsAtTheBound: a small record that inflates far past
// the bound is refused having allocated about the bound, not what it
// inflates to.
func TestRecordDecodingStopsAtTheBound(t *testing.T) {
	const inflated, bound = 256 << 20, 1 << 20
	bomb := recordBomb(t, inflated)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := decodeRecord(bomb, bound)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errRecordTooLarge) {
		t.Fatalf("decoding a record that inflates to %d bytes with a bound of %d: %v, want errRecordTooLarge", inflated, bound, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*bound {
		t.Errorf("decoding the %d bytes of a record inflating to %d allocated %d bytes, want at most %d", len(bomb), inflated, alloc, 8*bound)
	}
}

// TestRecordBoundCountsTheJSON: a record whose JSON is exactly the bound
// decodes, compressed or not; one byte less refuses it.
func TestRecordBoundCountsTheJSON(t *testing.T) {
	rel := codecRelease()
	raw, err := json.Marshal(rel)
	if err != nil {
		t.Fatal(err)
	}
	compressed, err := encodeRecord(rel)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"gzip": compressed, "plain": []byte(base64.StdEncoding.EncodeToString(raw))} {
		if _, err := decodeRecord(data, int64(len(raw))); err != nil {
			t.Errorf("%s: a record of exactly the bound: %v", name, err)
		}
		if _, err := decodeRecord(data, int64(len(raw))-1); !errors.Is(err, errRecordTooLarge) {
			t.Errorf("%s: a record one byte over the bound: %v, want errRecordTooLarge", name, err)
		}
	}
}
