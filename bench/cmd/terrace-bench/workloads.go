package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// workload is one named scenario. prepare creates what the scenario needs
// but does not measure (a Target, a class, the informers observing
// completion); run is timed and measured: it creates the root objects and
// returns once all are done.
type workload struct {
	name        string
	description string
	// roots is the number of root objects, the divisor of "per root".
	roots   int
	prepare func(ctx context.Context, b *bench, ns string) error
	run     func(ctx context.Context, b *bench, ns string) (timing, error)
	close   func()
}

// timing is what run observed: when each root object (or item) was done,
// from the first create; latencies for sequential runs.
type timing struct {
	start     time.Time
	doneAt    []time.Time
	latencies []time.Duration
	// steps splits sequential runs' latencies into the hops between the
	// steps of their jobs (single only).
	steps []stepResult
}

// Workload names, as -workloads takes them.
const (
	wSingle = "single"
	wTree   = "tree"
	wChain  = "chain"
	wRoots  = "roots"
	wClaims = "claims"
	// wCrowded is roots again, in a namespace that already holds many
	// Succeeded installations: the time per installation must not grow with
	// the number already there (one of Terrace's performance targets).
	wCrowded = "crowded"
)

// single runs first, on a fresh control plane; apicost right after, on a
// control plane that holds almost nothing yet: its prices are the floor,
// without the heap and watch load the larger workloads leave behind.
var allWorkloads = []string{wSingle, wAPICost, wTree, wChain, wRoots, wCrowded, wClaims}

// defaultSizes are the sizes Terrace's performance targets name; roots runs
// once per size.
var defaultSizes = map[string][]int{
	wSingle: {20},
	wTree:   {3}, // depth (fan-out is 3)
	wChain:  {50},
	wRoots:  {50, 200, 1000},
	// installations already there : installations created at once
	wCrowded: {1000, 200},
	wClaims:  {100},
	// requests of each kind
	wAPICost: {500},
}

// treeFanOut is the fan-out of the tree workload.
const treeFanOut = 3

// newWorkloads makes the runs of one named workload from its sizes: roots
// runs once per size, crowded once with both of its sizes, the others once.
func newWorkloads(name string, sizes []int, creators int) []workload {
	switch name {
	case wRoots:
		ws := make([]workload, 0, len(sizes))
		for _, n := range sizes {
			ws = append(ws, rootInstallations(n, creators))
		}
		return ws
	case wCrowded:
		return []workload{crowded(sizes[0], sizes[1], creators)}
	}
	return []workload{newWorkload(name, sizes[0], creators)}
}

func newWorkload(name string, n, creators int) workload {
	switch name {
	case wSingle:
		return singleManifest(n)
	case wTree:
		return tree(n, treeFanOut)
	case wChain:
		return chain(n)
	case wClaims:
		return claims(n, creators)
	}
	panic("unknown workload " + name)
}

// --- judges -------------------------------------------------------------------

func errorMessage(e *lsv1alpha1.Error) string {
	if e == nil {
		return "no lastError"
	}
	return e.Reason + ": " + e.Message
}

// jobDone judges Installations, Executions and DeployItems: done when the
// job finished Succeeded, failed when it finished otherwise.
func jobDone(o client.Object) (state, string) {
	var phase lsv1alpha1.Phase
	var job, finished string
	var lastErr *lsv1alpha1.Error
	switch x := o.(type) {
	case *lsv1alpha1.Installation:
		phase, job, finished, lastErr = x.Status.Phase, x.Status.JobID, x.Status.JobIDFinished, x.Status.LastError
	case *lsv1alpha1.Execution:
		phase, job, finished, lastErr = x.Status.Phase, x.Status.JobID, x.Status.JobIDFinished, x.Status.LastError
	case *lsv1alpha1.DeployItem:
		phase, job, finished, lastErr = x.Status.Phase, x.Status.JobID, x.Status.JobIDFinished, x.Status.LastError
	default:
		return pending, ""
	}
	if job == "" || job != finished {
		return pending, ""
	}
	if phase != lsv1alpha1.PhaseSucceeded {
		return failed, fmt.Sprintf("finished %s: %s", phase, errorMessage(lastErr))
	}
	return done, ""
}

func claimBound(o client.Object) (state, string) {
	c, ok := o.(*appstudiov1alpha1.DeploymentTargetClaim)
	if !ok {
		return pending, ""
	}
	switch c.Status.Phase {
	case appstudiov1alpha1.DeploymentTargetClaimPhaseBound:
		return done, ""
	case appstudiov1alpha1.DeploymentTargetClaimPhaseLost:
		return failed, "Lost"
	}
	return pending, ""
}

// --- objects ------------------------------------------------------------------

const reconcile = string(lsv1alpha1.OperationReconcile)

func rootInstallation(ns, name string, fs map[string]string, targetImport bool) *lsv1alpha1.Installation {
	inst := &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			// Root installations start a job only on operation: reconcile.
			Annotations: map[string]string{lsv1alpha1.OperationAnnotation: reconcile},
		},
		Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{Inline: &lsv1alpha1.InlineBlueprint{Filesystem: fs}}},
	}
	if targetImport {
		inst.Spec.Imports.Targets = []lsv1alpha1.TargetImport{{Name: "cluster", Target: targetName}}
	}
	return inst
}

// mockBlueprint: one execution with one mock item.
func mockBlueprint() map[string]string {
	return map[string]string{lsv1alpha1.BlueprintFileName: `deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: item
      type: landscaper.gardener.cloud/mock
      config:
        apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
        kind: ProviderConfiguration
`}
}

// manifestLevel is a blueprint that imports the cluster Target, deploys one
// ConfigMap named after the installation into the installation's namespace
// with the manifest deployer, and has fanOut sub-installations of the
// blueprint in directory sub (none when sub is empty), handing the Target on.
func manifestLevel(sub string, fanOut int) string {
	s := `imports:
- name: cluster
  type: target
  targetType: landscaper.gardener.cloud/kubernetes-cluster
deployExecutions:
- name: default
  type: GoTemplate
  template: |
    deployItems:
    - name: item
      type: landscaper.gardener.cloud/kubernetes-manifest
      target:
        import: cluster
      config:
        apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2
        kind: ProviderConfiguration
        manifests:
        - policy: manage
          manifest:
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {{ .installation.name }}
              namespace: {{ .installation.namespace }}
            data:
              installation: {{ .installation.name }}
`
	if sub != "" {
		s += "subinstallations:\n"
		for i := range fanOut {
			s += fmt.Sprintf("- name: s%d\n  blueprint:\n    dir: %s\n  imports:\n    targets:\n    - name: cluster\n      target: cluster\n", i, sub)
		}
	}
	return s
}

// treeBlueprint: depth levels of manifestLevel, fanOut sub-installations each.
func treeBlueprint(depth, fanOut int) (fs map[string]string, installations int) {
	fs = map[string]string{}
	dir := ""
	level := 1
	for d := 1; d <= depth; d++ {
		sub := ""
		if d < depth {
			sub = fmt.Sprintf("l%d", d)
		}
		fs[dir+lsv1alpha1.BlueprintFileName] = manifestLevel(sub, fanOut)
		installations += level
		level *= fanOut
		if sub != "" {
			dir += sub + "/"
		}
	}
	return fs, installations
}

// targetName is the cluster Target the manifest workloads deploy to.
const targetName = "cluster"

// createTarget creates the kubeconfig Secret and the Target of the manifest
// workloads in ns: the same API server, as the bench's target identity.
func (b *bench) createTarget(ctx context.Context, ns string) error {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: targetName + "-kubeconfig"},
		Data:       map[string][]byte{"kubeconfig": b.targetKubeconfig},
	}
	if err := b.c.Create(ctx, secret); err != nil {
		return err
	}
	return b.c.Create(ctx, &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: targetName},
		Spec: lsv1alpha1.TargetSpec{
			Type:      lsv1alpha1.KubernetesClusterTargetType,
			SecretRef: &lsv1alpha1.LocalSecretReference{Name: secret.Name, Key: "kubeconfig"},
		},
	})
}

// createAtOnce creates objs with `creators` concurrent clients.
func (b *bench) createAtOnce(ctx context.Context, objs []client.Object, creators int) error {
	return inParallel(len(objs), min(creators, len(objs)), func(i int) error {
		if err := b.c.Create(ctx, objs[i]); err != nil {
			return fmt.Errorf("creating %s: %w", objs[i].GetName(), err)
		}
		return nil
	})
}

// inParallel calls do(0..n-1) from workers goroutines; the first error wins.
func inParallel(n, workers int, do func(i int) error) error {
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// --- the workloads --------------------------------------------------------------

// singleManifest: one root installation with one manifest item, n times one
// after the other; each latency is from the create's response to the watch
// event showing it Succeeded.
func singleManifest(n int) workload {
	var t *tracker
	var steps *stepClock
	w := workload{
		name:        wSingle,
		description: fmt.Sprintf("one root installation with one manifest item, create → Succeeded, %d times one after the other", n),
		roots:       n,
	}
	w.prepare = func(ctx context.Context, b *bench, ns string) (err error) {
		if err := b.createTarget(ctx, ns); err != nil {
			return err
		}
		if t, err = b.track(ctx, ns, &lsv1alpha1.Installation{}, jobDone); err != nil {
			return err
		}
		steps, err = b.clockSteps(ctx, ns)
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		tm := timing{start: time.Now()}
		fs := map[string]string{lsv1alpha1.BlueprintFileName: manifestLevel("", 0)}
		createdAt := map[string]time.Time{}
		for i := range n {
			name := fmt.Sprintf("single-%02d", i)
			if err := b.c.Create(ctx, rootInstallation(ns, name, fs, true)); err != nil {
				return tm, err
			}
			created := time.Now()
			createdAt[name] = created
			at, err := t.waitFor(ctx, name)
			if err != nil {
				return tm, err
			}
			tm.latencies = append(tm.latencies, at.Sub(created))
		}
		tm.doneAt = t.times()
		tm.steps = stepResults(steps.hops(createdAt))
		return tm, nil
	}
	w.close = func() {
		t.close()
		steps.close()
	}
	return w
}

// rootInstallations: n root installations with one mock item each, created
// at once, until all are Succeeded.
func rootInstallations(n, creators int) workload {
	var t *tracker
	w := workload{
		name:        fmt.Sprintf("%s-%d", wRoots, n),
		description: fmt.Sprintf("%d root installations × one mock item, created at once (%d concurrent creators) → all Succeeded", n, creators),
		roots:       n,
	}
	w.prepare = func(ctx context.Context, b *bench, ns string) (err error) {
		t, err = b.track(ctx, ns, &lsv1alpha1.Installation{}, jobDone)
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		objs := mockRoots(ns, "root-", n)
		// Sub-objects are not installations: n is every installation.
		return t.timeUntilDone(ctx, n, func() error { return b.createAtOnce(ctx, objs, creators) })
	}
	w.close = func() { t.close() }
	return w
}

// crowded: n root installations with one mock item each, created at once in
// a namespace where present root installations were created and finished
// beforehand (not measured), until the n new ones are all Succeeded. Next to
// roots-n it shows whether the time per installation grows with the number
// already in the namespace.
func crowded(present, n, creators int) workload {
	var t *tracker
	w := workload{
		name: fmt.Sprintf("%s-%d", wCrowded, n),
		description: fmt.Sprintf("%d root installations × one mock item, created at once (%d concurrent creators) in a namespace that holds %d Succeeded ones → the new ones all Succeeded",
			n, creators, present),
		roots: n,
	}
	const newPrefix = "new-"
	w.prepare = func(ctx context.Context, b *bench, ns string) error {
		before, err := b.track(ctx, ns, &lsv1alpha1.Installation{}, jobDone)
		if err != nil {
			return err
		}
		defer before.close()
		objs := mockRoots(ns, "present-", present)
		if err := b.createAtOnce(ctx, objs, creators); err != nil {
			return err
		}
		if err := before.waitAll(ctx, present); err != nil {
			return fmt.Errorf("the %d installations present beforehand: %w", present, err)
		}
		// The measured tracker's informer lists the present ones too: only
		// the new ones count.
		t, err = b.track(ctx, ns, &lsv1alpha1.Installation{}, func(o client.Object) (state, string) {
			if !strings.HasPrefix(o.GetName(), newPrefix) {
				return pending, ""
			}
			return jobDone(o)
		})
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		objs := mockRoots(ns, newPrefix, n)
		return t.timeUntilDone(ctx, n, func() error { return b.createAtOnce(ctx, objs, creators) })
	}
	w.close = func() { t.close() }
	return w
}

// mockRoots are n root installations with one mock item each, named
// prefix plus a four-digit number.
func mockRoots(ns, prefix string, n int) []client.Object {
	objs := make([]client.Object, n)
	for i := range n {
		objs[i] = rootInstallation(ns, fmt.Sprintf("%s%04d", prefix, i), mockBlueprint(), false)
	}
	return objs
}

// tree: one root installation whose blueprint has depth levels of fanOut
// sub-installations, each with one manifest item, until every installation
// is Succeeded.
func tree(depth, fanOut int) workload {
	var t *tracker
	fs, installations := treeBlueprint(depth, fanOut)
	w := workload{
		name:        wTree,
		description: fmt.Sprintf("a tree of depth %d, fan-out %d (%d installations, one manifest item each) → all Succeeded", depth, fanOut, installations),
		roots:       1,
	}
	w.prepare = func(ctx context.Context, b *bench, ns string) (err error) {
		if err := b.createTarget(ctx, ns); err != nil {
			return err
		}
		t, err = b.track(ctx, ns, &lsv1alpha1.Installation{}, jobDone)
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		return t.timeUntilDone(ctx, installations, func() error { return b.c.Create(ctx, rootInstallation(ns, "tree", fs, true)) })
	}
	w.close = func() { t.close() }
	return w
}

// chain: one execution of n mock items, each depending on the one before,
// until the execution is Succeeded; first/half/all are over the items.
func chain(n int) workload {
	var items, execs *tracker
	w := workload{
		name:        wChain,
		description: fmt.Sprintf("one execution of %d mock items in a chain (dependsOn) → Succeeded", n),
		roots:       1,
	}
	w.prepare = func(ctx context.Context, b *bench, ns string) (err error) {
		if items, err = b.track(ctx, ns, &lsv1alpha1.DeployItem{}, jobDone); err != nil {
			return err
		}
		execs, err = b.track(ctx, ns, &lsv1alpha1.Execution{}, jobDone)
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		raw, err := json.Marshal(mockv1alpha1.ProviderConfiguration{
			TypeMeta: metav1.TypeMeta{APIVersion: mockv1alpha1.SchemeGroupVersion.String(), Kind: "ProviderConfiguration"},
		})
		if err != nil {
			return timing{}, err
		}
		exec := &lsv1alpha1.Execution{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: "chain",
				Annotations: map[string]string{lsv1alpha1.OperationAnnotation: reconcile},
			},
		}
		for i := range n {
			it := lsv1alpha1.DeployItemTemplate{
				Name: fmt.Sprintf("i%03d", i), Type: lsv1alpha1.MockDeployItemType,
				Config: runtime.RawExtension{Raw: raw},
			}
			if i > 0 {
				it.DependsOn = []string{fmt.Sprintf("i%03d", i-1)}
			}
			exec.Spec.DeployItems = append(exec.Spec.DeployItems, it)
		}
		tm := timing{start: time.Now()}
		if err := b.c.Create(ctx, exec); err != nil {
			return tm, err
		}
		if err := execs.waitAll(ctx, 1); err != nil {
			return tm, err
		}
		tm.doneAt = items.times()
		if len(tm.doneAt) != n {
			return tm, fmt.Errorf("the execution succeeded but %d of %d items were seen Succeeded", len(tm.doneAt), n)
		}
		// "all" is the execution's end, after its last item's.
		tm.doneAt[n-1] = execs.times()[0]
		return tm, nil
	}
	w.close = func() {
		items.close()
		execs.close()
	}
	return w
}

// claims: n DeploymentTargetClaims of a class of the sandbox provisioner,
// created at once, until all are Bound (each through a SpaceRequest, a
// namespace with credentials, and a DeploymentTarget).
func claims(n, creators int) workload {
	var t *tracker
	var class string
	w := workload{
		name:        wClaims,
		description: fmt.Sprintf("%d DeploymentTargetClaims dynamically provisioned (%s), created at once (%d concurrent creators) → all Bound", n, appstudiov1alpha1.SandboxProvisioner, creators),
		roots:       n,
	}
	w.prepare = func(ctx context.Context, b *bench, ns string) (err error) {
		class = ns + "-sandbox"
		if err := b.c.Create(ctx, &appstudiov1alpha1.DeploymentTargetClass{
			ObjectMeta: metav1.ObjectMeta{Name: class},
			Spec: appstudiov1alpha1.DeploymentTargetClassSpec{
				Provisioner:   appstudiov1alpha1.SandboxProvisioner,
				ReclaimPolicy: appstudiov1alpha1.ReclaimPolicyDelete,
			},
		}); err != nil {
			return err
		}
		t, err = b.track(ctx, ns, &appstudiov1alpha1.DeploymentTargetClaim{}, claimBound)
		return err
	}
	w.run = func(ctx context.Context, b *bench, ns string) (timing, error) {
		objs := make([]client.Object, n)
		for i := range n {
			objs[i] = &appstudiov1alpha1.DeploymentTargetClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("claim-%03d", i)},
				Spec:       appstudiov1alpha1.DeploymentTargetClaimSpec{DeploymentTargetClassName: class},
			}
		}
		return t.timeUntilDone(ctx, n, func() error { return b.createAtOnce(ctx, objs, creators) })
	}
	w.close = func() { t.close() }
	return w
}

// parseSizes reads -n: "single=20,roots=50:200:1000,crowded=1000:200,chain=50,claims=100,tree=3".
func parseSizes(s string) (map[string][]int, error) {
	out := map[string][]int{}
	for k, v := range defaultSizes {
		out[k] = v
	}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, vals, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("-n %q: want workload=N[:N...]", part)
		}
		if _, known := defaultSizes[name]; !known {
			return nil, fmt.Errorf("-n: unknown workload %q (known: %s)", name, strings.Join(allWorkloads, ", "))
		}
		var sizes []int
		for _, v := range strings.Split(vals, ":") {
			var n int
			if _, err := fmt.Sscan(v, &n); err != nil || n < 1 {
				return nil, fmt.Errorf("-n %s: %q is not a positive number", name, v)
			}
			sizes = append(sizes, n)
		}
		switch {
		case name == wCrowded && len(sizes) != 2:
			return nil, fmt.Errorf("-n %s: two sizes, present:new (e.g. crowded=1000:200)", name)
		case name != wRoots && name != wCrowded && len(sizes) != 1:
			return nil, fmt.Errorf("-n %s: one size only (roots takes several, separated by ':')", name)
		}
		out[name] = sizes
	}
	return out, nil
}
