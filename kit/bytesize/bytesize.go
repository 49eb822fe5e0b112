// Package bytesize is a byte count written as a Kubernetes quantity (64Mi,
// 500k, 1048576): the flag value every bound of bytes takes, and its
// printed form for messages.
package bytesize

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Format prints n bytes as a binary quantity (64Mi).
func Format(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// Flag is a pflag.Value that sets *p to a positive byte count.
func Flag(p *int64) pflag.Value { return flag{p} }

type flag struct{ p *int64 }

func (f flag) String() string {
	if f.p == nil {
		return ""
	}
	return Format(*f.p)
}

func (f flag) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a byte quantity such as 64Mi: %w", s, err)
	}
	v, ok := q.AsInt64()
	if !ok || v <= 0 {
		return fmt.Errorf("%q is not a positive byte count", s)
	}
	*f.p = v
	return nil
}

func (flag) Type() string { return "quantity" }
