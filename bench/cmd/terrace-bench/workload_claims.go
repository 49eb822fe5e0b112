package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appstudiov1alpha1 "github.com/terrace-dev/terrace/apis/appstudio/v1alpha1"
)

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
