package manifest_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// TestMissingTargetSecret: a Target that exists but whose kubeconfig Secret
// does not fails the job with a reason of its own (TargetSecretNotFound, not
// TargetNotFound), ERR_CONFIGURATION_PROBLEM, and a message naming the
// Secret and how to retry. The deployer does not watch Secrets: once the
// Secret exists, operation: reconcile starts a job that succeeds.
func TestMissingTargetSecret(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: "my-target", Namespace: ns},
		Spec: lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType,
			SecretRef: &lsv1alpha1.LocalSecretReference{Name: "my-target-kubeconfig"}},
	})).To(Succeed())
	di := item(ns, "app", "my-target", v2(`"manifests":[{"manifest":`+cm(ns, "app", map[string]string{"v": "1"})+`}]`))
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(failedWith(lib.ReasonTargetSecretNotFound, lsv1alpha1.ErrorConfigurationProblem,
		"Target "+ns+"/my-target: spec.secretRef: Secret my-target-kubeconfig not found"))
	g.Expect(get(g, di)().Status.LastError.Message).To(ContainSubstring(lsv1alpha1.OperationAnnotation + ": " + string(lsv1alpha1.OperationReconcile)))

	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "my-target-kubeconfig", Namespace: ns},
		Data: map[string][]byte{"kubeconfig": env.KubeConfig}})).To(Succeed())
	cur := get(g, di)()
	cur.Annotations = map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}
	g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(succeeded(),
		WithTransform(func(d *lsv1alpha1.DeployItem) string { return d.Status.JobID }, Not(Equal(cur.Status.JobID)))))
	g.Expect(configMap(g, ns, "app")()).To(Equal(map[string]string{"v": "1"}))
}
