package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// The chart workloads deploy one chart's content per root installation: as a
// Helm release with the helm deployer (helm), and the same three objects as
// manifests with the manifest deployer (chart-manifest), so that the two run
// side by side on identical content.
const (
	wHelm          = "helm"
	wChartManifest = "chart-manifest"
)

// benchChart is the chart the helm workloads deploy: a ConfigMap, a Service
// and a ServiceAccount (examples/helm-chart/chart), pushed to the bench
// environment's registry before the first item runs.
const (
	benchChartDir  = "examples/helm-chart/chart"
	benchChartRepo = "bench/charts/greeter"
	benchChartTag  = "0.1.0"
)

// chartWorkloads: with sizes sequential:atOnce, one item after the other
// (latencies, p50) and then atOnce items created at once.
func chartWorkloads(name string, sizes []int, creators int) []workload {
	return []workload{chartSequential(name, sizes[0]), chartAtOnce(name, sizes[1], creators)}
}

// chartSequential: n root installations with one chart item each, one after
// the other, after a warm-up item that puts the chart into the deployer's
// cache; each latency is from the create's response to the watch event
// showing the installation Succeeded.
func chartSequential(kind string, n int) workload {
	var t *tracker
	w := workload{
		name:        fmt.Sprintf("%s-single-%d", kind, n),
		description: fmt.Sprintf("one root installation with one %s item of three objects (chart cached), create → Succeeded, %d times one after the other", kind, n),
		roots:       n,
	}
	w.prepare = func(ctx context.Context, b *bench, ns string) (err error) {
		t, err = b.prepareChart(ctx, ns, kind)
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		tm := timing{start: time.Now()}
		fs := chartBlueprint(kind, b.chartRef())
		for i := range n {
			name := fmt.Sprintf("%s-%02d", kind, i)
			if err := b.c.Create(ctx, rootInstallation(ns, name, fs, true)); err != nil {
				return tm, err
			}
			created := time.Now()
			at, err := t.waitFor(ctx, name)
			if err != nil {
				return tm, err
			}
			tm.latencies = append(tm.latencies, at.Sub(created))
		}
		tm.doneAt = t.times()
		return tm, nil
	}
	w.close = func() { t.close() }
	return w
}

// chartAtOnce: n root installations with one chart item each, created at
// once (chart cached by a warm-up item), until all are Succeeded.
func chartAtOnce(kind string, n, creators int) workload {
	var t *tracker
	w := workload{
		name:        fmt.Sprintf("%s-%d", kind, n),
		description: fmt.Sprintf("%d root installations × one %s item of three objects (chart cached), created at once (%d concurrent creators) → all Succeeded", n, kind, creators),
		roots:       n,
	}
	w.prepare = func(ctx context.Context, b *bench, ns string) (err error) {
		t, err = b.prepareChart(ctx, ns, kind)
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		fs := chartBlueprint(kind, b.chartRef())
		objs := make([]client.Object, n)
		for i := range n {
			objs[i] = rootInstallation(ns, fmt.Sprintf("%s-%04d", kind, i), fs, true)
		}
		return t.timeUntilDone(ctx, n, func() error { return b.createAtOnce(ctx, objs, creators) })
	}
	w.close = func() { t.close() }
	return w
}

// prepareChart pushes the chart (once per bench run), creates the Target,
// runs one unmeasured warm-up item (so the measured ones find the chart in
// the helm deployer's cache and the target's API discovery warm) and starts
// tracking the other installations in ns.
func (b *bench) prepareChart(ctx context.Context, ns, kind string) (*tracker, error) {
	if !b.chartPushed {
		if err := b.pushChart(ctx); err != nil {
			return nil, err
		}
		b.chartPushed = true
	}
	if err := b.createTarget(ctx, ns); err != nil {
		return nil, err
	}
	const warmUp = "warm-up"
	before, err := b.track(ctx, ns, &lsv1alpha1.Installation{}, jobDone)
	if err != nil {
		return nil, err
	}
	defer before.close()
	if err := b.c.Create(ctx, rootInstallation(ns, warmUp, chartBlueprint(kind, b.chartRef()), true)); err != nil {
		return nil, err
	}
	if _, err := before.waitFor(ctx, warmUp); err != nil {
		return nil, fmt.Errorf("the warm-up item: %w", err)
	}
	return b.track(ctx, ns, &lsv1alpha1.Installation{}, func(o client.Object) (state, string) {
		if o.GetName() == warmUp {
			return pending, ""
		}
		return jobDone(o)
	})
}

// chartRef is the chart's reference in the bench environment's registry.
func (b *bench) chartRef() string {
	return b.registry + "/" + benchChartRepo + ":" + benchChartTag
}

// pushChart pushes the example chart with the terrace CLI, as a user would.
func (b *bench) pushChart(ctx context.Context) error {
	cli := filepath.Join(b.root, "bin", "terrace")
	cmd := exec.CommandContext(ctx, cli, "chart", "push", "--plain-http", //nolint:gosec // the project's own CLI
		filepath.Join(b.root, benchChartDir), b.registry+"/"+benchChartRepo)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s chart push: %w: %s", cli, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// readRegistryAddress reads the address hack/local-env.sh wrote for the
// environment's OCI registry.
func readRegistryAddress(env *localEnv) (string, error) {
	raw, err := os.ReadFile(filepath.Join(env.dir, "registry", "address"))
	if err != nil {
		return "", fmt.Errorf("the bench environment's registry address: %w", err)
	}
	return strings.TrimSpace(string(raw)), nil
}

// chartBlueprint deploys the chart's three objects, named after the
// installation, into the installation's namespace: as a Helm release, or as
// manifests (the objects the chart renders, written out).
func chartBlueprint(kind, ref string) map[string]string {
	head := `imports:
- name: cluster
  type: target
  targetType: landscaper.gardener.cloud/kubernetes-cluster
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: item
      target:
        import: cluster
`
	if kind == wHelm {
		return map[string]string{lsv1alpha1.BlueprintFileName: head + `      type: landscaper.gardener.cloud/helm
      config:
        apiVersion: helm.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
        chart:
          ref: ` + ref + `
        name: {{ .installation.name }}
        namespace: {{ .installation.namespace }}
        values:
          greeting: {{ .installation.name }}
          port: 8080
`}
	}
	return map[string]string{lsv1alpha1.BlueprintFileName: head + `      type: landscaper.gardener.cloud/kubernetes-manifest
      config:
        apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2
        kind: ProviderConfiguration
        manifests:
        - policy: manage
          manifest:
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {{ .installation.name }}-greeting
              namespace: {{ .installation.namespace }}
            data:
              greeting: {{ .installation.name }}
        - policy: manage
          manifest:
            apiVersion: v1
            kind: Service
            metadata:
              name: {{ .installation.name }}
              namespace: {{ .installation.namespace }}
            spec:
              selector:
                app.kubernetes.io/instance: {{ .installation.name }}
              ports:
              - name: http
                port: 8080
        - policy: manage
          manifest:
            apiVersion: v1
            kind: ServiceAccount
            metadata:
              name: {{ .installation.name }}
              namespace: {{ .installation.namespace }}
`}
}
