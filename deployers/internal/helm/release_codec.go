package helm

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"helm.sh/helm/v3/pkg/release"
)

// A release record's data is base64(gzip(JSON of the release)), as Helm
// writes it; records without the gzip header (Helm's oldest) are
// base64(JSON).
//
// A gzip compressor holds over a megabyte of state: allocated afresh for
// every record, as Helm's driver does, it is most of what the deployer
// allocates per release, and with a few releases in flight it lifts the
// heap well above what the deployer keeps. The pools reuse them.
var (
	recordWriters = sync.Pool{New: func() any {
		// Helm's level: a record that fits Helm's Secret fits ours.
		zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestCompression)
		return zw
	}}
	recordReaders sync.Pool
)

var gzipMagic = []byte{0x1f, 0x8b, 0x08}

// errRecordTooLarge: a record's release JSON is larger than the bound the
// record was decoded with; it was not inflated further.
var errRecordTooLarge = errors.New("release record larger than the bound")

// encodeRecord is rel's record data.
func encodeRecord(rel *release.Release) ([]byte, error) {
	raw, err := json.Marshal(rel)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, _ := recordWriters.Get().(*gzip.Writer)
	zw.Reset(&buf)
	_, err = zw.Write(raw)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	// The pooled writer must not keep the record alive.
	zw.Reset(io.Discard)
	recordWriters.Put(zw)
	if err != nil {
		return nil, err
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(buf.Len()))
	base64.StdEncoding.Encode(out, buf.Bytes())
	return out, nil
}

// decodeRecord is the release of a record's data; errRecordTooLarge when
// its JSON is over maxBytes. A record is read from a target cluster, whose
// tenant may write one that inflates to gigabytes: at most maxBytes+1 bytes
// are inflated.
func decodeRecord(data []byte, maxBytes int64) (*release.Release, error) {
	if len(data) == 0 {
		return nil, errEmptyRecord
	}
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(data)))
	n, err := base64.StdEncoding.Decode(raw, data)
	if err != nil {
		return nil, err
	}
	raw = raw[:n]
	if bytes.HasPrefix(raw, gzipMagic) {
		if raw, err = gunzip(raw, maxBytes); err != nil {
			return nil, err
		}
	}
	if int64(len(raw)) > maxBytes {
		return nil, errRecordTooLarge
	}
	var rel release.Release
	if err := json.Unmarshal(raw, &rel); err != nil {
		return nil, err
	}
	return &rel, nil
}

// gunzip inflates compressed, stopping one byte past maxBytes.
func gunzip(compressed []byte, maxBytes int64) ([]byte, error) {
	src := bytes.NewReader(compressed)
	zr, _ := recordReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(src)
	} else {
		err = zr.Reset(src)
	}
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxBytes+1))
	if cerr := zr.Close(); err == nil {
		err = cerr
	}
	recordReaders.Put(zr)
	return out, err
}
