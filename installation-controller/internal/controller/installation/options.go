package installation

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/terrace-dev/terrace/installation-controller/internal/components"
	"github.com/terrace-dev/terrace/installation-controller/internal/tmpl"
)

// Flags of the bounds, named in the errors of the installations that hit one.
const (
	FlagMaxSubInstallationDepth         = "--max-subinstallation-depth"
	FlagMaxSubInstallationsPerBlueprint = "--max-subinstallations-per-blueprint"
	FlagMaxInstallationsPerTree         = "--max-installations-per-tree"
	FlagMaxImports                      = "--max-imports"
	FlagMaxImportBytes                  = "--max-import-bytes"
	FlagRenderTimeout                   = "--render-timeout"
	FlagMaxTemplateStateBytes           = "--max-template-state-bytes"
	FlagMinAutomaticReconcileInterval   = "--min-automatic-reconcile-interval"
)

// Defaults of the bounds. An installation's blueprint and imports are
// written by a tenant of a shared controller: what it may make the
// controller create, read and render is bounded, so one tenant cannot fill
// etcd or the controller's memory for the others.
const (
	// DefaultMaxSubInstallationDepth: a sub-installation of a root is at
	// depth 1; one at this depth renders no sub-installations of its own.
	DefaultMaxSubInstallationDepth = 8
	// DefaultMaxSubInstallationsPerBlueprint bounds one blueprint's
	// sub-installations (static and rendered together).
	DefaultMaxSubInstallationsPerBlueprint = 64
	// DefaultMaxInstallationsPerTree bounds a root and all its
	// sub-installations: depth and fan-out alone still allow 64^8.
	DefaultMaxInstallationsPerTree = 256
	// DefaultMaxImports bounds an installation's data and target imports.
	DefaultMaxImports = 100
	// DefaultMaxImportBytes bounds the bytes of all imports of one
	// installation as read (DataObject data, Secret and ConfigMap values,
	// Target configs); one object can be imported many times.
	DefaultMaxImportBytes = 4 << 20
	// DefaultRenderTimeout is the deadline of all renders and data mappings
	// of one reconcile together.
	DefaultRenderTimeout = 10 * time.Second
	// DefaultMaxTemplateStateBytes bounds the template state of one
	// installation (all its executions' states, as JSON): it is kept in one
	// Secret, and a Secret holds at most 1 MiB.
	DefaultMaxTemplateStateBytes = 256 << 10
	// DefaultMinAutomaticReconcileInterval is the shortest interval of a
	// root's automaticReconcile: each automatic job is a whole job.
	DefaultMinAutomaticReconcileInterval = time.Minute
)

// Options configure the controller. Zero bounds mean their defaults.
type Options struct {
	// Controller overrides the manager's controller defaults (concurrency,
	// panic recovery); the zero value keeps them.
	Controller controller.Options
	// Rechecks spaces out the re-checks of a waiting phase; nil means the
	// default (500 ms, doubling up to one minute). Re-checks are a safety
	// net for a missed event: tests set one that never fires in time, so
	// every wait they pass was ended by a watch event.
	Rechecks workqueue.TypedRateLimiter[types.NamespacedName]

	MaxSubInstallationDepth         int
	MaxSubInstallationsPerBlueprint int
	MaxInstallationsPerTree         int
	MaxImports                      int
	MaxImportBytes                  int64
	// RenderTimeout is one reconcile's deadline for all its renders and
	// data mappings.
	RenderTimeout time.Duration
	// MaxTemplateStateBytes bounds one installation's template state.
	MaxTemplateStateBytes int
	// TemplateMemoryBudget is the process-wide budget of all renders in
	// flight (tmpl.SetProcessBudget); 0 keeps tmpl.DefaultProcessBudget.
	TemplateMemoryBudget int64
	// MinAutomaticReconcileInterval raises shorter automaticReconcile
	// intervals to itself.
	MinAutomaticReconcileInterval time.Duration
	// Components bound the component version cache and the blueprints read
	// from component versions (their own flags, components.Options).
	Components components.Options
}

// BindFlags registers the options as flags on fs; fields already set are
// the flags' defaults.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	d := o.withDefaults()
	fs.IntVar(&o.MaxSubInstallationDepth, flagName(FlagMaxSubInstallationDepth), d.MaxSubInstallationDepth,
		"How deep sub-installations may nest under a root (its sub-installations are at depth 1); an installation at this depth whose blueprint renders sub-installations fails.")
	fs.IntVar(&o.MaxSubInstallationsPerBlueprint, flagName(FlagMaxSubInstallationsPerBlueprint), d.MaxSubInstallationsPerBlueprint,
		"Most sub-installations one blueprint may have (static and rendered together).")
	fs.IntVar(&o.MaxInstallationsPerTree, flagName(FlagMaxInstallationsPerTree), d.MaxInstallationsPerTree,
		"Most installations one root's tree may hold, the root included.")
	fs.IntVar(&o.MaxImports, flagName(FlagMaxImports), d.MaxImports,
		"Most data and target imports one installation may have.")
	fs.Int64Var(&o.MaxImportBytes, flagName(FlagMaxImportBytes), d.MaxImportBytes,
		"Most bytes all imports of one installation may hold together, as read (an object imported twice counts twice).")
	fs.DurationVar(&o.RenderTimeout, flagName(FlagRenderTimeout), d.RenderTimeout,
		"Deadline of all template renders and data mappings of one reconcile together.")
	fs.IntVar(&o.MaxTemplateStateBytes, flagName(FlagMaxTemplateStateBytes), d.MaxTemplateStateBytes,
		"Most bytes the template state of one installation (what its deploy and export executions render under state:, as JSON) may hold.")
	fs.Int64Var(&o.TemplateMemoryBudget, flagName(tmpl.ProcessBudgetFlag), d.TemplateMemoryBudget,
		"Process-wide memory budget, in bytes, of all template renders in flight; a render that cannot get its share fails or is retried.")
	fs.DurationVar(&o.MinAutomaticReconcileInterval, flagName(FlagMinAutomaticReconcileInterval), d.MinAutomaticReconcileInterval,
		"Shortest interval of an installation's spec.automaticReconcile; shorter intervals are raised to it.")
	o.Components.BindFlags(fs)
}

// withDefaults returns o with every zero bound set to its default.
func (o Options) withDefaults() Options {
	orInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	orInt(&o.MaxSubInstallationDepth, DefaultMaxSubInstallationDepth)
	orInt(&o.MaxSubInstallationsPerBlueprint, DefaultMaxSubInstallationsPerBlueprint)
	orInt(&o.MaxInstallationsPerTree, DefaultMaxInstallationsPerTree)
	orInt(&o.MaxImports, DefaultMaxImports)
	orInt(&o.MaxTemplateStateBytes, DefaultMaxTemplateStateBytes)
	if o.MaxImportBytes <= 0 {
		o.MaxImportBytes = DefaultMaxImportBytes
	}
	if o.RenderTimeout <= 0 {
		o.RenderTimeout = DefaultRenderTimeout
	}
	if o.MinAutomaticReconcileInterval <= 0 {
		o.MinAutomaticReconcileInterval = DefaultMinAutomaticReconcileInterval
	}
	if o.TemplateMemoryBudget <= 0 {
		o.TemplateMemoryBudget = tmpl.DefaultProcessBudget
	}
	return o
}

// apply sets the process-wide template budget: it is shared by every
// render of the process.
func (o Options) apply() error {
	if err := tmpl.SetProcessBudget(o.TemplateMemoryBudget); err != nil {
		return fmt.Errorf("installation: %w", err)
	}
	return nil
}

func flagName(flag string) string { return flag[len("--"):] }
