package lib_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// deployerNamespace is where the deployers' ServiceAccounts live
// (config/components, make up).
const deployerNamespace = "terrace-system"

// asDeployer creates the ServiceAccount of binary with its generated
// ClusterRole (config/rbac/<binary>/role.yaml) and its admission policy
// (config/policies/<binary>.yaml), as make up and make deploy do, and returns
// a client that authenticates as that ServiceAccount once the policy is in
// force.
func asDeployer(t *testing.T, g *WithT, binary string) client.Client {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{}
	readYAML(g, "../../config/rbac/"+binary+"/role.yaml", role)
	policy, binding := &admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	readYAML(g, "../../config/policies/"+binary+".yaml", policy, binding)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployerNamespace}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: deployerNamespace, Name: binary}}
	for _, o := range []client.Object{sa, role, policy, binding, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: deployerNamespace, Name: binary}},
	}} {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	g.Expect(env.Client.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	// RBAC and the policy take a moment to be in force: a probe RBAC allows
	// and only the policy refuses.
	probe := func() error {
		err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: deployerNamespace, Name: "probe-" + binary}})
		if err == nil {
			_ = env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: deployerNamespace, Name: "probe-" + binary}})
			return fmt.Errorf("the policy is not in force yet")
		}
		if !refusedByPolicy(err, policy.Name) {
			return err
		}
		return nil
	}
	g.Eventually(probe, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	return c
}

func readYAML(g *WithT, path string, objs ...client.Object) {
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	docs := strings.Split(string(data), "\n---\n")
	g.Expect(docs).To(HaveLen(len(objs)), path)
	for i, o := range objs {
		g.Expect(yaml.UnmarshalStrict([]byte(docs[i]), o)).To(Succeed(), path)
	}
}

// refusedByPolicy: err is the denial of the admission policy named policy.
func refusedByPolicy(err error, policy string) bool {
	return (apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'")
}

// TestWritePolicyLimitsDeployersToTheirExportSecrets: each deployer's
// ServiceAccount, with its generated role, writes export Secrets as the
// library does (create, update, delete), and nothing else: its admission
// policy refuses a Secret that is not labelled and named as an export, one
// labelled for another item, relabelling and rewriting somebody's Secret, and
// deleting it.
func TestWritePolicyLimitsDeployersToTheirExportSecrets(t *testing.T) {
	for _, binary := range []string{"manifest-deployer", "mock-deployer"} {
		t.Run(binary, func(t *testing.T) {
			ns, g := setup(t, nil)
			ctx := context.Background()
			c := asDeployer(t, g, binary)
			refused := func(err error, what string) {
				t.Helper()
				g.Expect(refusedByPolicy(err, "terrace-"+binary+"-writes")).To(BeTrue(), "%s: want refused by the policy, got %v", what, err)
			}

			// What the library does: the item exists, so its owner reference holds.
			di := newItem(ns, "app")
			di.Spec.Type = "test.terrace.dev/unserved"
			g.Expect(env.Client.Create(ctx, di)).To(Succeed())
			g.Expect(lib.WriteExport(ctx, c, binary, di, []byte(`{"v":1}`))).To(Succeed(), "creating the export Secret")
			g.Expect(lib.WriteExport(ctx, c, binary, di, []byte(`{"v":2}`))).To(Succeed(), "updating the export Secret")
			g.Expect(lib.DeleteExport(ctx, c, di)).To(Succeed(), "deleting the export Secret")
			g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-export"}, &corev1.Secret{}))).To(BeTrue())

			refused(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unlabelled"}}), "an unlabelled Secret")
			refused(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-export",
				Labels: map[string]string{lib.ExportOwnerLabel: "app"}}}), "a Secret labelled for another item's name")
			refused(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-export",
				Labels: map[string]string{lib.ExportOwnerLabel: "app"}}, Type: corev1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{}`)}}), "an export Secret of another type")

			theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-export"}, Data: map[string][]byte{"password": []byte("theirs")}}
			g.Expect(env.Client.Create(ctx, theirs)).To(Succeed())
			refused(c.Patch(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-export"}}, client.RawPatch(types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"`+lib.ExportOwnerLabel+`":"db"}},"data":{"password":"b3Vycw=="}}`))),
				"labelling and rewriting somebody's Secret in one patch")
			refused(c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-export"}}), "deleting somebody's Secret")
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), theirs)).To(Succeed())
			g.Expect(theirs.Data).To(Equal(map[string][]byte{"password": []byte("theirs")}))
			g.Expect(theirs.Labels).To(BeEmpty())
			// The library fails such an export with a clear error (its patch
			// tests the label before the policy is asked).
			db := &lsv1alpha1.DeployItem{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", UID: "db-uid"},
				Status: lsv1alpha1.DeployItemStatus{ExportReference: &lsv1alpha1.ObjectReference{Namespace: ns, Name: "db-export"}}}
			err := lib.WriteExport(ctx, c, binary, db, []byte(`{}`))
			g.Expect(err).To(MatchError(ContainSubstring("was not written by this deploy item")))
		})
	}
}
