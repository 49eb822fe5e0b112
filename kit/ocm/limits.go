package ocm

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
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
	fs.Var(byteQuantity{&l.MaxDescriptorBytes}, "ocm-max-descriptor-bytes",
		"The largest component descriptor, component config or OCI manifest read from a registry, e.g. 4Mi.")
	fs.Var(byteQuantity{&l.MaxBlobBytes}, "ocm-max-blob-bytes",
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
	return fmt.Sprintf("%s is larger than %s (--%s)", e.What, formatBytes(e.Limit), e.Flag)
}

func formatBytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// byteQuantity is a pflag value of a byte count written as a Kubernetes
// quantity (10Mi, 500k, 1048576).
type byteQuantity struct{ p *int64 }

func (b byteQuantity) String() string {
	if b.p == nil {
		return ""
	}
	return formatBytes(*b.p)
}

func (b byteQuantity) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a byte quantity such as 64Mi: %w", s, err)
	}
	v, ok := q.AsInt64()
	if !ok || v <= 0 {
		return fmt.Errorf("%q is not a positive byte count", s)
	}
	*b.p = v
	return nil
}

func (byteQuantity) Type() string { return "quantity" }
