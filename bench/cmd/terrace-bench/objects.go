package main

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// reconcile is the operation annotation that starts a root object's job.
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
