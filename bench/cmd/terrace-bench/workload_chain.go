package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	mockv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/mock/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

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
		exec, err := chainExecution(ns, n)
		if err != nil {
			return timing{}, err
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

// chainExecution is an Execution of n mock items, each depending on the one
// before.
func chainExecution(ns string, n int) (*lsv1alpha1.Execution, error) {
	raw, err := json.Marshal(mockv1alpha1.ProviderConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: mockv1alpha1.SchemeGroupVersion.String(), Kind: "ProviderConfiguration"},
	})
	if err != nil {
		return nil, err
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
	return exec, nil
}
