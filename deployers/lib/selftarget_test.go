package lib_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// selfTarget is a self target of ServiceAccount sa, its token asked for seconds.
func selfTarget(g *WithT, ns, sa string, seconds int) *lsv1alpha1.Target {
	raw, err := json.Marshal(map[string]any{"selfConfig": map[string]any{"serviceAccount": map[string]any{"name": sa}, "expirationSeconds": seconds}})
	g.Expect(err).NotTo(HaveOccurred())
	cfg := lsv1alpha1.NewAnyJSON(raw)
	return &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "self"},
		Spec: lsv1alpha1.TargetSpec{Type: "kubernetes-cluster", Config: &cfg}}
}

// tokenOf returns the bearer token of a kubeconfig.
func tokenOf(g *WithT, kc *lib.TargetKubeconfig) string {
	raw, err := clientcmd.Load(kc.Data)
	g.Expect(err).NotTo(HaveOccurred())
	return raw.AuthInfos[raw.Contexts[raw.CurrentContext].AuthInfo].Token
}

// TestSelfTargetTokenRenewed: a self target's token is reused while it is
// fresh and replaced once 80% of the lifetime the API server granted has
// passed; the kubeconfig authenticates as the ServiceAccount.
func TestSelfTargetTokenRenewed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sa"}})).To(Succeed())
	r := lib.NewTargetResolver(lib.TargetResolverOptions{Secrets: env.Client, Self: env.Config, Tokens: env.Client})
	now := time.Now()
	lib.SetSelfTargetClock(r, func() time.Time { return now })
	tg := selfTarget(g, ns, "sa", 600)

	first, err := r.Kubeconfig(ctx, tg)
	g.Expect(err).NotTo(HaveOccurred())
	now = now.Add(7 * time.Minute)
	again, err := r.Kubeconfig(ctx, tg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tokenOf(g, again)).To(Equal(tokenOf(g, first)), "a token with 3 of 10 minutes left is reused")
	now = now.Add(2 * time.Minute)
	renewed, err := r.Kubeconfig(ctx, tg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tokenOf(g, renewed)).NotTo(Equal(tokenOf(g, first)), "a token with 1 of 10 minutes left is renewed")

	cfg, err := r.RESTConfig(ctx, tg, renewed)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	review := &authenticationv1.SelfSubjectReview{}
	g.Expect(c.Create(ctx, review)).To(Succeed())
	g.Expect(review.Status.UserInfo.Username).To(Equal("system:serviceaccount:" + ns + ":sa"))
}

// TestSelfTargetTokenRequestForbidden: when the deployer may not mint
// tokens, the error names the Target, the field and the refusal, and is
// retried (granting the deployer the right helps), not a configuration error.
func TestSelfTargetTokenRequestForbidden(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testutil.Namespace(t, env)
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sa"}})).To(Succeed())
	weak := rest.CopyConfig(env.Config)
	weak.Impersonate = rest.ImpersonationConfig{UserName: "no-rights"}
	tokens, err := client.New(weak, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	r := lib.NewTargetResolver(lib.TargetResolverOptions{Secrets: env.Client, Self: env.Config, Tokens: tokens})

	_, err = r.Kubeconfig(ctx, selfTarget(g, ns, "sa", 3600))
	var e *lib.Error
	g.Expect(errors.As(err, &e)).To(BeTrue(), "%v", err)
	g.Expect(e.Reason).To(Equal(lib.ReasonTargetTokenRefused))
	g.Expect(e.Message).To(And(ContainSubstring("Target "+ns+"/self: spec.config.selfConfig: requesting a token for ServiceAccount "+ns+"/sa"),
		ContainSubstring("forbidden")))
	g.Expect(lib.IsPermanent(err)).To(BeFalse())
}

// TestSelfTargetsRefused: a resolver not given the deployer's own cluster,
// or told to deny them, refuses self targets with a clear message.
func TestSelfTargetsRefused(t *testing.T) {
	g := NewWithT(t)
	r := lib.NewTargetResolver(lib.TargetResolverOptions{Secrets: env.Client})
	_, err := r.Kubeconfig(context.Background(), selfTarget(g, "ns", "sa", 3600))
	g.Expect(err).To(MatchError(ContainSubstring("Target ns/self: spec.config.selfConfig: this deployer does not serve self targets")))
	g.Expect(lib.IsPermanent(err)).To(BeTrue())

	denied := lib.NewTargetResolver(lib.TargetResolverOptions{Secrets: env.Client, Self: env.Config, Tokens: env.Client,
		Guard: lib.TargetClientOptions{DenySelfTargets: true}})
	_, err = denied.Kubeconfig(context.Background(), selfTarget(g, "ns", "sa", 3600))
	g.Expect(err).To(MatchError(ContainSubstring("Target ns/self: spec.config.selfConfig: this deployer refuses self targets (--deny-self-targets)")))
	g.Expect(lib.IsPermanent(err)).To(BeTrue())
}

func TestShortTargetTypes(t *testing.T) {
	g := NewWithT(t)
	g.Expect(lib.SameTargetType("kubernetes-cluster", lsv1alpha1.KubernetesClusterTargetType)).To(BeTrue())
	g.Expect(lib.SameTargetType(lsv1alpha1.KubernetesClusterTargetType, "kubernetes-cluster")).To(BeTrue())
	g.Expect(lib.SameTargetType("example.com/kubernetes-cluster", lsv1alpha1.KubernetesClusterTargetType)).To(BeFalse())
	g.Expect(lsv1alpha1.FullTargetType("")).To(Equal(""))
}
