package tracingtest

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terrace-dev/terrace/kit/testenv"
	"github.com/terrace-dev/terrace/kit/tracing"
)

func TestWatchAnnotationsRecordsAnnotatedVersions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env := testenv.StartT(t, nil)
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	for _, ns := range []string{"ns", "other"} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	aw := WatchAnnotations(t, c, "ns", &corev1.ConfigMapList{}, &corev1.SecretList{})

	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain"}}
	traced := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "traced",
		Annotations: map[string]string{tracing.TraceContextAnnotation: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}
	elsewhere := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "elsewhere"}}
	g.Expect(c.Create(ctx, plain)).To(Succeed())
	g.Expect(c.Create(ctx, traced)).To(Succeed())
	g.Expect(c.Create(ctx, elsewhere)).To(Succeed())
	g.Expect(c.Delete(ctx, plain)).To(Succeed())
	g.Expect(c.Delete(ctx, elsewhere)).To(Succeed())

	g.Eventually(aw.Deleted).WithTimeout(5 * time.Second).WithPolling(10 * time.Millisecond).Should(ConsistOf("plain"))
	g.Eventually(aw.Annotated).WithTimeout(5 * time.Second).WithPolling(10 * time.Millisecond).
		Should(ConsistOf(HavePrefix("ADDED *v1.Secret traced rv ")))
	g.Expect(aw.Seen()).To(Equal(3), "added plain, added traced, deleted plain; nothing of namespace other")
}
