package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// NamespaceLimitsAnnotation on a SpaceRequest holds, as JSON
// (NamespaceLimits), the sizes of the ResourceQuota and LimitRange the
// SpaceRequest controller puts into the namespace it provisions. The
// toolchain SpaceRequest API has no field for them (its tier decides them in
// host-operator), so an annotation carries them and the spec stays
// wire-compatible. The sandbox provisioner writes it from the class's
// parameters; a SpaceRequest without it gets DefaultNamespaceLimits.
const NamespaceLimitsAnnotation = "terrace.dev/namespace-limits"

// NamespaceLimits sizes a provisioned namespace: what all its pods together
// may use (a ResourceQuota) and what a container that says nothing gets (a
// LimitRange's defaults). A field left out takes its DefaultNamespaceLimits
// value.
type NamespaceLimits struct {
	// CPU bounds requests.cpu and limits.cpu of the namespace's pods.
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// Memory bounds requests.memory and limits.memory.
	Memory *resource.Quantity `json:"memory,omitempty"`
	// Pods bounds the number of pods (a whole number).
	Pods *resource.Quantity `json:"pods,omitempty"`
	// Storage bounds requests.storage of the namespace's
	// PersistentVolumeClaims.
	Storage *resource.Quantity `json:"storage,omitempty"`
	// ContainerCPU and ContainerMemory are the limits of a container that
	// sets none.
	ContainerCPU    *resource.Quantity `json:"containerCPU,omitempty"`
	ContainerMemory *resource.Quantity `json:"containerMemory,omitempty"`
	// ContainerCPURequest and ContainerMemoryRequest are the requests of a
	// container that sets none.
	ContainerCPURequest    *resource.Quantity `json:"containerCPURequest,omitempty"`
	ContainerMemoryRequest *resource.Quantity `json:"containerMemoryRequest,omitempty"`
}

// DefaultNamespaceLimits are the sizes of a namespace whose class or
// SpaceRequest names none: 2 CPUs, 4Gi of memory, 20 pods, 10Gi of storage;
// a container gets 500m CPU and 512Mi limits, 100m and 128Mi requests.
func DefaultNamespaceLimits() NamespaceLimits {
	q := resource.MustParse
	return NamespaceLimits{
		CPU: ptrTo(q("2")), Memory: ptrTo(q("4Gi")), Pods: ptrTo(q("20")), Storage: ptrTo(q("10Gi")),
		ContainerCPU: ptrTo(q("500m")), ContainerMemory: ptrTo(q("512Mi")),
		ContainerCPURequest: ptrTo(q("100m")), ContainerMemoryRequest: ptrTo(q("128Mi")),
	}
}

func ptrTo(q resource.Quantity) *resource.Quantity { return &q }

// fields lists l's fields with their JSON names, in a fixed order.
func (l *NamespaceLimits) fields() []struct {
	name string
	q    **resource.Quantity
} {
	return []struct {
		name string
		q    **resource.Quantity
	}{
		{"cpu", &l.CPU}, {"memory", &l.Memory}, {"pods", &l.Pods}, {"storage", &l.Storage},
		{"containerCPU", &l.ContainerCPU}, {"containerMemory", &l.ContainerMemory},
		{"containerCPURequest", &l.ContainerCPURequest}, {"containerMemoryRequest", &l.ContainerMemoryRequest},
	}
}

// WithDefaults returns l with every field left out set to its default.
func (l NamespaceLimits) WithDefaults() NamespaceLimits {
	out := *l.DeepCopy()
	def := DefaultNamespaceLimits()
	theirs := def.fields()
	for i, f := range out.fields() {
		if *f.q == nil {
			*f.q = *theirs[i].q
		}
	}
	return out
}

// Validate reports what makes complete limits (WithDefaults) unusable: a
// negative size, a fractional pod count, a container request over its
// limit, or a container limit over the namespace's total (no pod could
// start).
func (l NamespaceLimits) Validate() error {
	var errs []error
	for _, f := range l.fields() {
		if *f.q == nil {
			errs = append(errs, fmt.Errorf("%s is missing", f.name))
		} else if (*f.q).Sign() < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", f.name, (*f.q).String()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if l.Pods.MilliValue()%1000 != 0 {
		errs = append(errs, fmt.Errorf("pods must be a whole number, got %s", l.Pods.String()))
	}
	for _, c := range []struct {
		small, big         *resource.Quantity
		smallName, bigName string
	}{
		{l.ContainerCPURequest, l.ContainerCPU, "containerCPURequest", "containerCPU"},
		{l.ContainerMemoryRequest, l.ContainerMemory, "containerMemoryRequest", "containerMemory"},
		{l.ContainerCPU, l.CPU, "containerCPU", "cpu"},
		{l.ContainerMemory, l.Memory, "containerMemory", "memory"},
	} {
		if c.small.Cmp(*c.big) > 0 {
			errs = append(errs, fmt.Errorf("%s (%s) must not exceed %s (%s)", c.smallName, c.small.String(), c.bigName, c.big.String()))
		}
	}
	return errors.Join(errs...)
}

// ParseNamespaceLimits reads a NamespaceLimitsAnnotation value: strict JSON
// (an unknown field is an error, not a silent default), completed with the
// defaults and validated.
func ParseNamespaceLimits(value string) (NamespaceLimits, error) {
	var l NamespaceLimits
	dec := json.NewDecoder(bytes.NewReader([]byte(value)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return NamespaceLimits{}, err
	}
	if dec.More() {
		return NamespaceLimits{}, errors.New("unexpected data after the JSON object")
	}
	l = l.WithDefaults()
	if err := l.Validate(); err != nil {
		return NamespaceLimits{}, err
	}
	return l, nil
}

// String is l as a NamespaceLimitsAnnotation value: JSON with the
// quantities in canonical form, the same for the same limits.
func (l NamespaceLimits) String() string {
	data, err := json.Marshal(l)
	if err != nil {
		return fmt.Sprintf("%#v", l) // unreachable: quantities always marshal
	}
	return string(data)
}
