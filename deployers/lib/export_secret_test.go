package lib_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
	"github.com/terrace-dev/terrace/kit/observabilitytest"
)

// TestExportNeverTakesOverAForeignSecret: a user's Secret named like the
// item's export Secret is neither taken over nor deleted: the job fails with
// a configuration problem naming it. The item's own export Secret is written
// and deleted as before.
func TestExportNeverTakesOverAForeignSecret(t *testing.T) {
	ns, g := setup(t, &behaviour{export: []byte(`{"url":"https://example.org"}`)})
	ctx := context.Background()
	user := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-export", Namespace: ns}, Data: map[string][]byte{"password": []byte("s3cret")}}
	g.Expect(env.Client.Create(ctx, user)).To(Succeed())
	web := newItem(ns, "web")
	own := newItem(ns, "own")
	g.Expect(env.Client.Create(ctx, web)).To(Succeed())
	g.Expect(env.Client.Create(ctx, own)).To(Succeed())

	g.Eventually(get(g, web), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), settled()))
	le := get(g, web)().Status.LastError
	g.Expect(le.Reason).To(Equal(lib.ReasonExportConflict))
	g.Expect(le.Codes).To(ConsistOf(lsv1alpha1.ErrorConfigurationProblem))
	g.Expect(le.Message).To(ContainSubstring(ns + "/web-export"))
	g.Expect(get(g, web)().Status.ExportReference).To(BeNil())
	g.Eventually(func() []string { return observabilitytest.Events(g, env.Client, ns, "web") }, timeout, interval).
		Should(ContainElement("Warning/" + lib.ReasonExportConflict))
	userNow := func() *corev1.Secret {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(user), s)).To(Succeed())
		return s
	}
	g.Expect(userNow().Data).To(Equal(map[string][]byte{"password": []byte("s3cret")}))
	g.Expect(userNow().OwnerReferences).To(BeEmpty())

	g.Eventually(get(g, own), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
	ownSecret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own-export"}, ownSecret)).To(Succeed())
	g.Expect(ownSecret.Data).To(HaveKey(lib.ExportKey))
	g.Expect(ownSecret.Labels).To(HaveKeyWithValue(lib.ExportOwnerLabel, "own"))
	// A second job updates the item's own Secret.
	firstJob := get(g, own)().Status.JobIDFinished
	annotate(g, own, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(func() string { return get(g, own)().Status.JobIDFinished }, timeout, interval).ShouldNot(Equal(firstJob))
	g.Eventually(get(g, own), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))

	for _, di := range []*lsv1alpha1.DeployItem{web, own} {
		g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
		g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	}
	g.Expect(userNow().Data).To(Equal(map[string][]byte{"password": []byte("s3cret")}), "the user's Secret survives the item's deletion")
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own-export"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the item's own export Secret is deleted with it: %v", err)
}

// TestExportDoesNotAdoptASecretRecreatedUnderItsName: the item's export
// Secret is deleted and somebody creates a Secret of their own under its
// name. The item's next job, which knows its export (status.exportRef),
// neither overwrites nor labels nor owns that Secret: it fails with
// ExportSecretConflict naming it, and deleting the item leaves it alone.
func TestExportDoesNotAdoptASecretRecreatedUnderItsName(t *testing.T) {
	ns, g := setup(t, &behaviour{export: []byte(`{"url":"https://example.org"}`)})
	ctx := context.Background()
	di := newItem(ns, "app")
	g.Expect(env.Client.Create(ctx, di)).To(Succeed())
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
	g.Expect(get(g, di)().Status.ExportReference).NotTo(BeNil())

	key := client.ObjectKey{Namespace: ns, Name: "app-export"}
	g.Expect(env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}})).To(Succeed())
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}, Data: map[string][]byte{"password": []byte("theirs")}}
	g.Expect(env.Client.Create(ctx, theirs)).To(Succeed())

	firstJob := get(g, di)().Status.JobIDFinished
	annotate(g, di, lsv1alpha1.OperationAnnotation, string(lsv1alpha1.OperationReconcile))
	g.Eventually(func() string { return get(g, di)().Status.JobIDFinished }, timeout, interval).ShouldNot(Equal(firstJob))
	g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), settled()))
	le := get(g, di)().Status.LastError
	g.Expect(le.Reason).To(Equal(lib.ReasonExportConflict))
	g.Expect(le.Codes).To(ConsistOf(lsv1alpha1.ErrorConfigurationProblem))
	g.Expect(le.Message).To(ContainSubstring(ns + "/app-export"))

	now := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, key, now)).To(Succeed())
	g.Expect(now.Data).To(Equal(map[string][]byte{"password": []byte("theirs")}))
	g.Expect(now.Labels).NotTo(HaveKey(lib.ExportOwnerLabel))
	g.Expect(now.OwnerReferences).To(BeEmpty())

	g.Expect(env.Client.Delete(ctx, di)).To(Succeed())
	g.Eventually(gone(g, di), timeout, interval).Should(BeTrue())
	g.Expect(env.Client.Get(ctx, key, now)).To(Succeed(), "their Secret survives the item's deletion")
	g.Expect(now.Data).To(Equal(map[string][]byte{"password": []byte("theirs")}))
}
