package spacerequest_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terrace-dev/terrace/spacerequest-stub/controllers/spacerequest"
)

// TestGeneratedRoleGrantsOnlyWhatTheStubProvisions: the stub's generated
// ClusterRole (the suite runs the stub with it, so every other test shows it
// suffices) mints tokens only for ServiceAccounts named namespace-manager,
// not for any other one (say, one bound to cluster-admin), and writes
// ServiceAccounts and RoleBindings only of the names it provisions. A
// RoleBinding it may write only with server-side apply: kube-apiserver
// authorizes a PATCH that creates as "create" of the name in the URL, a POST
// create has no name to authorize.
func TestGeneratedRoleGrantsOnlyWhatTheStubProvisions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	team := unique("team-rbac")
	createNamespace(t, g, team)
	asStub, err := client.New(stubConfig, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	forbidden := func(err error) {
		t.Helper()
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	}

	// Tokens: only for namespace-manager.
	powerful := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "powerful"}}
	g.Expect(env.Client.Create(ctx, powerful)).To(Succeed())
	manager := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: spacerequest.ServiceAccountName}}
	g.Expect(env.Client.Create(ctx, manager)).To(Succeed())
	token := func() *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	}
	forbidden(asStub.SubResource("token").Create(ctx, powerful, token()))
	forbidden(asStub.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "default"}}, token()))
	tr := token()
	g.Expect(asStub.SubResource("token").Create(ctx, manager, tr)).To(Succeed())
	g.Expect(tr.Status.Token).NotTo(BeEmpty())

	// ServiceAccounts: only namespace-manager, also listed only by that name.
	forbidden(asStub.Apply(ctx, corev1ac.ServiceAccount("powerful", team).WithLabels(map[string]string{"a": "b"}), client.FieldOwner("rbac-test")))
	forbidden(asStub.Apply(ctx, corev1ac.ServiceAccount("other", team), client.FieldOwner("rbac-test")))
	g.Expect(asStub.Apply(ctx, corev1ac.ServiceAccount(spacerequest.ServiceAccountName, team).WithLabels(map[string]string{"a": "b"}),
		client.FieldOwner("rbac-test"))).To(Succeed())
	forbidden(asStub.List(ctx, &corev1.ServiceAccountList{}))
	g.Expect(asStub.List(ctx, &corev1.ServiceAccountList{}, client.MatchingFields{"metadata.name": spacerequest.ServiceAccountName})).To(Succeed())

	// RoleBindings: only namespace-manager-edit, created by server-side
	// apply (a PATCH), not by a POST.
	binding := func(name, ns string) *rbacv1ac.RoleBindingApplyConfiguration {
		return rbacv1ac.RoleBinding(name, ns).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(spacerequest.EditClusterRole)).
			WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(spacerequest.ServiceAccountName).WithNamespace(ns))
	}
	forbidden(asStub.Apply(ctx, binding("other", team), client.FieldOwner("rbac-test")))
	g.Expect(asStub.Apply(ctx, binding(spacerequest.RoleBindingName, team), client.FieldOwner("rbac-test"))).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: team, Name: spacerequest.RoleBindingName}, &rbacv1.RoleBinding{})).To(Succeed())
	other := unique("team-rbac-post")
	createNamespace(t, g, other)
	forbidden(asStub.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: spacerequest.RoleBindingName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: spacerequest.EditClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: other, Name: spacerequest.ServiceAccountName}},
	}))
	forbidden(asStub.List(ctx, &rbacv1.RoleBindingList{}))
	g.Expect(asStub.List(ctx, &rbacv1.RoleBindingList{}, client.MatchingFields{"metadata.name": spacerequest.RoleBindingName})).To(Succeed())
}
