package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// The component workloads run roots-n's installations with the blueprint
// read from one component version (component) and carried inline
// (component-inline), so that the two run side by side on the same
// blueprint.
const (
	wComponent       = "component"
	wComponentInline = "component-inline"
)

// The bench's component version, pushed to the bench environment's
// registry once per bench run; the version carries the run's ID, so that a
// reused environment's caches do not hold it yet.
const (
	benchComponentRepo     = "bench/ocm"
	benchComponentName     = "bench.terrace.dev/mock"
	benchBlueprintResource = "blueprint"
	blueprintMediaType     = "application/vnd.gardener.landscaper.blueprint.v1+tar+gzip"
)

// componentWorkloads: n root installations × one mock item, created at
// once, the blueprint from the component version or inline.
func componentWorkloads(kind string, n, creators int) workload {
	var (
		t     *tracker
		proxy *countingProxy
	)
	from := "inline"
	if kind == wComponent {
		from = "from one component version read through a counting registry proxy (not warmed: the first fetch is measured)"
	}
	w := workload{
		name:        fmt.Sprintf("%s-%d", kind, n),
		description: fmt.Sprintf("%d root installations × one mock item, blueprint %s, created at once (%d concurrent creators) → all Succeeded", n, from, creators),
		roots:       n,
	}
	w.prepare = func(ctx context.Context, b *bench, ns string) (err error) {
		if kind == wComponent {
			if proxy, err = b.prepareComponent(ctx); err != nil {
				return err
			}
		}
		t, err = b.track(ctx, ns, &lsv1alpha1.Installation{}, jobDone)
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		objs := make([]client.Object, n)
		for i := range n {
			inst := rootInstallation(ns, fmt.Sprintf("root-%04d", i), mockBlueprint(), false)
			if proxy != nil {
				useComponentBlueprint(inst, proxy.addr+"/"+benchComponentRepo, b.componentVersion())
			}
			objs[i] = inst
		}
		if proxy != nil {
			proxy.reset()
		}
		return t.timeUntilDone(ctx, n, func() error { return b.createAtOnce(ctx, objs, creators) })
	}
	w.account = func(res *result) error {
		if proxy == nil {
			return nil
		}
		res.Registry = newRegistryFetches(proxy.counts(), n)
		return res.Registry.refetched()
	}
	w.close = func() {
		t.close()
		if proxy != nil {
			proxy.close()
		}
	}
	return w
}

// useComponentBlueprint makes inst read its blueprint from the bench's
// component version in the repository at baseURL.
func useComponentBlueprint(inst *lsv1alpha1.Installation, baseURL, version string) {
	inst.Spec.ComponentDescriptor = &lsv1alpha1.ComponentDescriptorDefinition{Reference: &lsv1alpha1.ComponentDescriptorReference{
		RepositoryContext: &lsv1alpha1.RepositoryContext{Type: "OCIRegistry", BaseURL: baseURL},
		ComponentName:     benchComponentName,
		Version:           version,
	}}
	inst.Spec.Blueprint = lsv1alpha1.BlueprintDefinition{Reference: &lsv1alpha1.BlueprintReference{ResourceName: benchBlueprintResource}}
}

// componentVersion is the version of the bench's component in this run.
func (b *bench) componentVersion() string { return "1.0.0-run" + b.runID }

// prepareComponent pushes the component version (once per bench run) and
// starts the counting proxy in front of the registry. It reads nothing
// through the proxy: the controllers' first fetch is part of the run.
func (b *bench) prepareComponent(ctx context.Context) (*countingProxy, error) {
	if !b.componentPushed {
		if err := b.pushComponent(ctx); err != nil {
			return nil, err
		}
		b.componentPushed = true
	}
	return startCountingProxy(b.registry)
}

// pushComponent writes a component constructor with the mock blueprint as
// a dir input into a temporary directory and pushes it with the terrace
// CLI, as a user would.
func (b *bench) pushComponent(ctx context.Context) (err error) {
	dir, err := os.MkdirTemp("", "terrace-bench-component-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	if err := os.Mkdir(filepath.Join(dir, "blueprint"), 0o750); err != nil {
		return err
	}
	for name, content := range mockBlueprint() {
		if err := os.WriteFile(filepath.Join(dir, "blueprint", name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	constructor := filepath.Join(dir, "component-constructor.yaml")
	if err := os.WriteFile(constructor, []byte(componentConstructor(b.componentVersion())), 0o600); err != nil {
		return err
	}
	cli := filepath.Join(b.root, "bin", "terrace")
	cmd := exec.CommandContext(ctx, cli, "component", "push", "--plain-http", //nolint:gosec // the project's own CLI
		"--repo", b.registry+"/"+benchComponentRepo, constructor)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s component push: %w: %s", cli, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// componentConstructor is the bench component in version: one resource,
// the blueprint directory next to the constructor.
func componentConstructor(version string) string {
	return `components:
- name: ` + benchComponentName + `
  version: ` + version + `
  provider:
    name: terrace-bench
  resources:
  - name: ` + benchBlueprintResource + `
    type: blueprint
    input:
      type: dir
      path: ./blueprint
      compress: true
      mediaType: ` + blueprintMediaType + `
`
}

// componentRatio compares the all-Succeeded time of a component run with
// the inline run of the same size.
type componentRatio struct {
	Component string  `json:"component"`
	Inline    string  `json:"inline"`
	Ratio     float64 `json:"allSecondsRatio"`
	// Failed: one of the two runs failed; its times may be partial.
	Failed bool `json:"failed,omitempty"`
}

// maxComponentRatio is the target: reading the blueprint from a component
// version costs at most this factor of the inline blueprint's time.
const maxComponentRatio = 1.3

// componentRatios pairs each component-n result with component-inline-n;
// runs without times are left out, failed ones marked.
func componentRatios(results []*result) []componentRatio {
	inline := map[string]*result{}
	for _, r := range results {
		if size, ok := strings.CutPrefix(r.Workload, wComponentInline+"-"); ok {
			inline[size] = r
		}
	}
	var out []componentRatio
	for _, r := range results {
		size, ok := strings.CutPrefix(r.Workload, wComponent+"-")
		in := inline[size]
		if !ok || in == nil || r.AllSec <= 0 || in.AllSec <= 0 {
			continue
		}
		out = append(out, componentRatio{Component: r.Workload, Inline: in.Workload, Ratio: r.AllSec / in.AllSec, Failed: r.Error != "" || in.Error != ""})
	}
	return out
}

// String is the summary's line.
func (c componentRatio) String() string {
	verdict := "within"
	if c.Ratio > maxComponentRatio {
		verdict = "OVER"
	}
	s := fmt.Sprintf("%s / %s all seconds: %.2f× (%s the target of %.1f×)", c.Component, c.Inline, c.Ratio, verdict, maxComponentRatio)
	if c.Failed {
		s += "; a run FAILED (see above)"
	}
	return s
}
