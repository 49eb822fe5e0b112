package lib_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// laggingType is served only by the deployer of TestLaggingCache.
const laggingType = "test.terrace.dev/lagging"

// laggingCache is a manager's cache that has not seen the Targets and
// Contexts of one name yet: reads of them find nothing, every other read and
// every write goes through unchanged.
type laggingCache struct {
	client.Client
	hidden string
}

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch obj.(type) {
	case *lsv1alpha1.Target, *lsv1alpha1.Context:
		if key.Name == c.hidden {
			return apierrors.NewNotFound(lsv1alpha1.SchemeGroupVersion.WithResource("targets").GroupResource(), key.Name)
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestLaggingCache: a Target and a Context created just before the item, which
// the deployer's cache has not seen yet, do not fail the job (TargetNotFound,
// ContextNotFound): the deployer asks the API server before reporting them
// missing. A Target or Context that does not exist still fails the job.
func TestLaggingCache(t *testing.T) {
	const hidden = "new"
	deployer := &recorder{traces: map[string][][]string{}, behaviour: map[string]*behaviour{}}
	testutil.StartManagerWithClient(t, env,
		func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.New(cfg, opts)
			return laggingCache{Client: c, hidden: hidden}, err
		},
		func(mgr ctrl.Manager) error {
			return lib.AddToManager(mgr, deployer, lib.Options{Type: laggingType, Name: "lagging", Version: "v0"})
		})
	ns, g := setup(t, nil)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Name: hidden, Namespace: ns}, Spec: lsv1alpha1.TargetSpec{Type: "example.org/any"}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &lsv1alpha1.Context{ObjectMeta: metav1.ObjectMeta{Name: hidden, Namespace: ns}})).To(Succeed())

	item := func(name, target, context string) *lsv1alpha1.DeployItem {
		di := &lsv1alpha1.DeployItem{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       lsv1alpha1.DeployItemSpec{Type: laggingType, Target: &lsv1alpha1.ObjectReference{Name: target}, Context: context},
		}
		g.Expect(env.Client.Create(ctx, di)).To(Succeed())
		return di
	}
	unseen := item("unseen", hidden, hidden)
	noTarget := item("no-target", "absent", "")
	noContext := item("no-context", hidden, "absent")

	g.Eventually(get(g, unseen), timeout, interval).Should(And(phase(lsv1alpha1.PhaseSucceeded), settled()))
	for di, reason := range map[*lsv1alpha1.DeployItem]string{noTarget: lib.ReasonTargetNotFound, noContext: lib.ReasonContextNotFound} {
		g.Eventually(get(g, di), timeout, interval).Should(And(phase(lsv1alpha1.PhaseFailed), settled()), di.Name)
		g.Expect(get(g, di)().Status.LastError.Reason).To(Equal(reason), di.Name)
	}
}
