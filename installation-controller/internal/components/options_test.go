package components

import (
	"testing"

	"github.com/spf13/pflag"
)

func TestBindFlagsSetsDefaultsAndParses(t *testing.T) {
	var o Options
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.BindFlags(fs)
	if o.CacheBytes != DefaultCacheBytes || o.MaxBlueprintFiles != DefaultMaxBlueprintFiles || o.Limits.MaxBlobBytes == 0 || o.JobPins != DefaultJobPins {
		t.Errorf("defaults not bound: %+v", o)
	}
	err := fs.Parse([]string{"--component-cache-bytes=1Mi", "--component-cache-dir=/var/cache/terrace", "--component-cache-disk-bytes=2Gi",
		"--max-blueprint-files=10", "--max-blueprint-bytes=512Ki", "--ocm-max-blob-bytes=1Mi", "--component-job-pins=7"})
	if err != nil {
		t.Fatal(err)
	}
	if o.CacheBytes != 1<<20 || o.CacheDir != "/var/cache/terrace" || o.CacheDiskBytes != 2<<30 || o.MaxBlueprintFiles != 10 || o.MaxBlueprintBytes != 512<<10 || o.Limits.MaxBlobBytes != 1<<20 || o.JobPins != 7 {
		t.Errorf("parsed %+v", o)
	}
	if err := fs.Parse([]string{"--component-cache-bytes=lots"}); err == nil {
		t.Error("a byte count that is not a quantity was accepted")
	}
}
