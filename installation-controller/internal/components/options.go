package components

import (
	"github.com/spf13/pflag"

	"github.com/terrace-dev/terrace/kit/bytesize"
	"github.com/terrace-dev/terrace/kit/ocm"
)

// Flags of the bounds, named in the errors that hit one.
const (
	FlagCacheBytes        = "component-cache-bytes"
	FlagCacheDir          = "component-cache-dir"
	FlagCacheDiskBytes    = "component-cache-disk-bytes"
	FlagMaxBlueprintFiles = "max-blueprint-files"
	FlagMaxBlueprintBytes = "max-blueprint-bytes"
	FlagJobPins           = "component-job-pins"
)

// Defaults of Options.
const (
	// DefaultCacheBytes bounds the descriptors and extracted blueprints
	// kept in memory: a few hundred typical component versions.
	DefaultCacheBytes = 64 << 20
	// DefaultCacheDiskBytes bounds the blueprint archives kept on disk
	// when a cache directory is set.
	DefaultCacheDiskBytes = 512 << 20
	// DefaultMaxBlueprintFiles matches the file count an inline blueprint
	// may have.
	DefaultMaxBlueprintFiles = 1000
	// DefaultMaxBlueprintBytes bounds the extracted files of one
	// blueprint together.
	DefaultMaxBlueprintBytes = 16 << 20
	// DefaultJobPins bounds the installations whose running job's digests
	// are remembered: a few hundred bytes each.
	DefaultJobPins = 10000
)

// Options configure a Resolver. Zero fields take their defaults.
type Options struct {
	// Limits bound what is read from registries (kit/ocm's flags).
	Limits ocm.Limits
	// CacheBytes bounds the in-memory cache.
	CacheBytes int64
	// CacheDir, when set, keeps blueprint archives on disk across
	// restarts; empty keeps nothing on disk.
	CacheDir string
	// CacheDiskBytes bounds the archives in CacheDir.
	CacheDiskBytes int64
	// MaxBlueprintFiles bounds the files of one blueprint.
	MaxBlueprintFiles int
	// MaxBlueprintBytes bounds the extracted bytes of one blueprint.
	MaxBlueprintBytes int64
	// JobPins bounds the installations whose running job's component
	// version digests are remembered (Request.Job).
	JobPins int
}

func (o Options) withDefaults() Options {
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.CacheDiskBytes <= 0 {
		o.CacheDiskBytes = DefaultCacheDiskBytes
	}
	if o.MaxBlueprintFiles <= 0 {
		o.MaxBlueprintFiles = DefaultMaxBlueprintFiles
	}
	if o.MaxBlueprintBytes <= 0 {
		o.MaxBlueprintBytes = DefaultMaxBlueprintBytes
	}
	if o.JobPins <= 0 {
		o.JobPins = DefaultJobPins
	}
	return o
}

// BindFlags registers the options (and kit/ocm's limits) as flags on fs;
// fields already set become the flags' defaults.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	*o = o.withDefaults()
	o.Limits.BindFlags(fs)
	fs.Var(bytesize.Flag(&o.CacheBytes), FlagCacheBytes,
		"Memory the component version cache may hold (descriptors and extracted blueprints, keyed by digest), e.g. 64Mi.")
	fs.StringVar(&o.CacheDir, FlagCacheDir, o.CacheDir,
		"Directory where blueprint archives are cached by digest across restarts; empty caches in memory only.")
	fs.Var(bytesize.Flag(&o.CacheDiskBytes), FlagCacheDiskBytes,
		"Disk the blueprint archive cache in --component-cache-dir may use, e.g. 512Mi.")
	fs.IntVar(&o.MaxBlueprintFiles, FlagMaxBlueprintFiles, o.MaxBlueprintFiles,
		"Most files a blueprint read from a component version may hold.")
	fs.Var(bytesize.Flag(&o.MaxBlueprintBytes), FlagMaxBlueprintBytes,
		"Most bytes the files of a blueprint read from a component version may hold together, e.g. 16Mi.")
	fs.IntVar(&o.JobPins, FlagJobPins, o.JobPins,
		"Most installations whose running job's component version digests are remembered, so that the job reads one content throughout without looking the tags up again; the least recently used are forgotten first and look their tags up again.")
}
