package cmdutil

import (
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/timeout"
)

// Flags are the deployer-specific flags.
type Flags struct {
	// Identity is status.deployer.identity (default: the deployer name plus
	// the host name, so replicas in different environments differ).
	Identity string
	// TargetSelector selects Targets by annotations (label-selector syntax).
	TargetSelector string
	// TargetLabelSelector selects Targets by labels.
	TargetLabelSelector string
	// DefaultTimeout bounds the jobs of items without spec.timeout.
	DefaultTimeout timeout.Timeout
	// CallTimeout bounds each call of the deployer (lib.Options.CallTimeout).
	CallTimeout time.Duration
}

// Bind binds the flags to fs.
func (f *Flags) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.Identity, "identity", "", "Identity of this deployer instance, written to status.deployer.identity (default: <name>-<hostname>).")
	fs.StringVar(&f.TargetSelector, "target-selector", "", `Serve only deploy items whose Target's annotations match this selector (label-selector syntax), e.g. "landscaper.gardener.cloud/environment=prod" or "!landscaper.gardener.cloud/environment". Empty: all items of the deployer's type.`)
	fs.StringVar(&f.TargetLabelSelector, "target-label-selector", "", "Serve only deploy items whose Target's labels match this selector. Empty: no label restriction.")
	f.DefaultTimeout = timeout.After(lib.DefaultTimeout)
	fs.DurationVar(&f.CallTimeout, "call-timeout", lib.DefaultCallTimeout,
		"How long one call of the deployer for one item (an apply, a deletion, an abort) may take before it is cancelled and retried; a slow target cluster holds a worker no longer.")
	fs.Var(&f.DefaultTimeout, "default-timeout", `How long a job of an item without spec.timeout may retry errors or wait (readiness, a pending deletion) since its lastReconcileTime before it fails with ERR_TIMEOUT; "none" disables. Keep it in line with the execution controller's --progressing-timeout.`)
}

// Resolve returns the identity (defaulted) and the parsed selector.
func (f *Flags) Resolve(name string) (string, lib.TargetSelector, error) {
	sel, err := lib.ParseTargetSelector(f.TargetSelector, f.TargetLabelSelector)
	if err != nil {
		return "", sel, err
	}
	id := f.Identity
	if id == "" {
		id = name
		if h, err := os.Hostname(); err == nil && h != "" {
			id = name + "-" + h
		}
	}
	return id, sel, nil
}
