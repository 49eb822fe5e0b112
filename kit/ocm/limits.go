package ocm

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/terrace-dev/terrace/kit/bytesize"
)

// Defaults of Limits.
const (
	DefaultMaxDescriptorBytes = 4 << 20
	DefaultMaxBlobBytes       = 128 << 20
	DefaultMaxReferenceDepth  = 16
	DefaultMaxComponents      = 256
)

// Limits bound what reading a component version costs. A zero field takes
// its default.
type Limits struct {
	// MaxDescriptorBytes caps a manifest, a component config and a
	// descriptor layer (--ocm-max-descriptor-bytes).
	MaxDescriptorBytes int64
	// MaxBlobBytes caps a local blob or OCI artifact layer read through
	// Blob (--ocm-max-blob-bytes).
	MaxBlobBytes int64
	// MaxReferenceDepth caps how deep ResolveReferences follows component
	// references (--ocm-max-reference-depth).
	MaxReferenceDepth int
	// MaxComponents caps how many component versions ResolveReferences
	// reads in all (--ocm-max-components).
	MaxComponents int
}

func (l Limits) withDefaults() Limits {
	if l.MaxDescriptorBytes <= 0 {
		l.MaxDescriptorBytes = DefaultMaxDescriptorBytes
	}
	if l.MaxBlobBytes <= 0 {
		l.MaxBlobBytes = DefaultMaxBlobBytes
	}
	if l.MaxReferenceDepth <= 0 {
		l.MaxReferenceDepth = DefaultMaxReferenceDepth
	}
	if l.MaxComponents <= 0 {
		l.MaxComponents = DefaultMaxComponents
	}
	return l
}

// BindFlags registers the limits as flags on fs; fields already set become
// the flags' defaults.
func (l *Limits) BindFlags(fs *pflag.FlagSet) {
	*l = l.withDefaults()
	fs.Var(bytesize.Flag(&l.MaxDescriptorBytes), "ocm-max-descriptor-bytes",
		"The largest component descriptor, component config or OCI manifest read from a registry, e.g. 4Mi.")
	fs.Var(bytesize.Flag(&l.MaxBlobBytes), "ocm-max-blob-bytes",
		"The largest resource (local blob or OCI artifact layer) read from a component version, e.g. 128Mi.")
	fs.IntVar(&l.MaxReferenceDepth, "ocm-max-reference-depth", l.MaxReferenceDepth,
		"How deep component references are followed from a component version.")
	fs.IntVar(&l.MaxComponents, "ocm-max-components", l.MaxComponents,
		"How many component versions one resolution of component references reads in all.")
}

// TooLargeError is content over a limit; it names the limit's flag.
type TooLargeError struct {
	What  string
	Limit int64
	Flag  string
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s (--%s)", e.What, bytesize.Format(e.Limit), e.Flag)
}
