package spacerequest_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/terrace-dev/terrace/spacerequest-stub/internal/controller/spacerequest"
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
	// Labelled as a namespace the stub provisioned: what this test shows
	// is RBAC's part, not the admission policy's (TestWritePolicy...).
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team,
		Labels: map[string]string{spacerequest.ManagedByLabel: spacerequest.ManagedByValue}}})).To(Succeed())
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
	// Never read one by one (the cache lists and watches): no get.
	forbidden(asStub.Get(ctx, client.ObjectKeyFromObject(manager), &corev1.ServiceAccount{}))
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
	forbidden(asStub.Get(ctx, client.ObjectKey{Namespace: team, Name: spacerequest.RoleBindingName}, &rbacv1.RoleBinding{}))
	g.Expect(asStub.List(ctx, &rbacv1.RoleBindingList{}, client.MatchingFields{"metadata.name": spacerequest.RoleBindingName})).To(Succeed())
}

// TestGeneratedRoleGrantsExactlyTheVerbsTheStubUses: the generated ClusterRole
// grants, per resource (and resourceNames), exactly the verbs the stub's
// client calls need, no more: the suite running the stub with that role
// shows none is missing, this shows none is left over. Caches (the
// manager's for SpaceRequests, Managed, the ClusterRole cache) list and
// watch, never get; single objects are read from the API server
// (APIReader) only for namespaces and Secrets; ServiceAccounts and
// RoleBindings are written by server-side apply (patch, and create when the
// patch creates); a verb added to a marker must be added here, with the call
// that needs it.
func TestGeneratedRoleGrantsExactlyTheVerbsTheStubUses(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(generatedRole)
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	g.Expect(yaml.UnmarshalStrict(data, role)).To(Succeed())
	got := map[string][]string{}
	for _, rule := range role.Rules {
		g.Expect(rule.NonResourceURLs).To(BeEmpty())
		names := strings.Join(rule.ResourceNames, ",")
		for _, group := range rule.APIGroups {
			for _, res := range rule.Resources {
				key := group + "/" + res + "[" + names + "]"
				got[key] = append(got[key], rule.Verbs...)
			}
		}
	}
	for k := range got {
		slices.Sort(got[k])
	}
	g.Expect(got).To(Equal(map[string][]string{
		"/namespaces[]":                             {"create", "delete", "get", "list", "patch", "watch"},
		"/secrets[]":                                {"create", "delete", "get", "list", "patch", "watch"},
		"/serviceaccounts[namespace-manager]":       {"create", "list", "patch", "watch"},
		"/serviceaccounts/token[namespace-manager]": {"create"},
		"rbac.authorization.k8s.io/rolebindings[namespace-manager-edit]": {"create", "list", "patch", "watch"},
		"/resourcequotas[namespace-quota]":                               {"create", "list", "patch", "watch"},
		"/limitranges[namespace-limits]":                                 {"create", "list", "patch", "watch"},
		"rbac.authorization.k8s.io/clusterroles[edit]":                   {"bind", "list", "watch"},
		"events.k8s.io/events[]":                                         {"create", "patch"},
		"toolchain.dev.openshift.com/spacerequests[]":                    {"list", "patch", "watch"},
		"toolchain.dev.openshift.com/spacerequests/status[]":             {"patch"},
		"toolchain.dev.openshift.com/spacerequests/finalizers[]":         {"update"},
	}))
}

// TestWritePolicyLimitsTheStubToWhatItProvisions: what the stub's ClusterRole
// must allow but the stub never does is refused by its admission policy
// (config/policies): a service-account-token Secret (kube-controller-manager
// would fill it with a token of any ServiceAccount), an unlabelled Secret,
// ServiceAccounts, RoleBindings and tokens in a namespace it did not
// provision, deleting a namespace that is not its own, and an UPDATE that
// labels a foreign namespace or Secret (judged by what the object was, not
// only by what the write makes it). What it provisions passes, also an update
// that labels its own object again after someone removed the label.
func TestWritePolicyLimitsTheStubToWhatItProvisions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	asStub, err := client.New(stubConfig, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	refused := func(err error, what string) {
		t.Helper()
		g.Expect(err).To(HaveOccurred(), what)
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%s: want refused by the policy, got %v", what, err)
		g.Expect(err.Error()).To(ContainSubstring("spacerequest-stub"), what)
	}
	labels := map[string]string{spacerequest.ManagedByLabel: spacerequest.ManagedByValue}
	foreign := unique("team-policy")
	createNamespace(t, g, foreign)

	refused(asStub.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: foreign, Name: "steal", Labels: labels,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
		Type: corev1.SecretTypeServiceAccountToken,
	}), "a service-account-token Secret")
	refused(asStub.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: foreign, Name: "unlabelled"}}), "an unlabelled Secret")
	g.Expect(asStub.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: foreign, Name: "kubeconfig", Labels: labels},
		Type: corev1.SecretTypeOpaque})).To(Succeed(), "an Opaque Secret with the stub's label")
	refused(asStub.Apply(ctx, corev1ac.ServiceAccount(spacerequest.ServiceAccountName, foreign), client.FieldOwner("policy-test")),
		"a ServiceAccount in a namespace the stub did not provision")
	refused(asStub.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: foreign}}), "deleting a namespace that is not the stub's")
	refused(asStub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unique("unlabelled")}}), "an unlabelled namespace")

	// UPDATE: a write that makes a foreign object "the stub's" (adds the
	// label) is judged by what the object was. Without that, the stub's token
	// could label any namespace (kube-system), apply a namespace-manager
	// ServiceAccount and a RoleBinding to edit in it and mint a token, or
	// relabel and rewrite anyone's Secret in one patch.
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: foreign, Name: "theirs"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("theirs")}}
	g.Expect(env.Client.Create(ctx, theirs)).To(Succeed())
	refused(asStub.Patch(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: foreign, Name: "theirs"}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"spacerequest-stub"}},"data":{"password":"b3Vycw=="}}`))),
		"labelling and rewriting a foreign Secret in one patch")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), theirs)).To(Succeed())
	g.Expect(string(theirs.Data["password"])).To(Equal("theirs"))
	// TokenRequest: RBAC allows namespace-manager's token in any namespace;
	// the policy only in the stub's.
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: foreign, Name: spacerequest.ServiceAccountName}})).To(Succeed())
	refused(asStub.SubResource("token").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: foreign, Name: spacerequest.ServiceAccountName}},
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}),
		"a token of a namespace-manager ServiceAccount in a namespace the stub did not provision")

	refused(asStub.Apply(ctx, corev1ac.Namespace(foreign).WithLabels(labels), client.FieldOwner("policy-test"), client.ForceOwnership),
		"labelling a foreign namespace (server-side apply)")
	refused(asStub.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: foreign}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"spacerequest-stub"}}}`))),
		"labelling a foreign namespace (merge patch)")
	ns := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: foreign}, ns)).To(Succeed())
	g.Expect(ns.Labels).NotTo(HaveKey(spacerequest.ManagedByLabel))

	own := unique("stub-policy")
	ownAnnotations := map[string]string{spacerequest.SpaceRequestAnnotation: own + "/sr"}
	g.Expect(asStub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: own, Labels: labels, Annotations: ownAnnotations}})).To(Succeed())
	g.Expect(asStub.Apply(ctx, corev1ac.ServiceAccount(spacerequest.ServiceAccountName, own), client.FieldOwner("policy-test"))).To(Succeed())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	g.Expect(asStub.SubResource("token").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: spacerequest.ServiceAccountName}}, tr)).To(Succeed(),
		"a token of namespace-manager in the stub's namespace")
	g.Expect(tr.Status.Token).NotTo(BeEmpty())
	g.Expect(asStub.Apply(ctx, corev1ac.Namespace(own).WithLabels(labels).WithAnnotations(ownAnnotations),
		client.FieldOwner("policy-test"), client.ForceOwnership)).To(Succeed(), "updating the stub's own namespace")
	// Someone removes the label; the stub puts it back (its annotation says
	// the namespace is its own): an UPDATE of what was the stub's.
	g.Expect(env.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: own}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}}}`)))).To(Succeed())
	g.Expect(asStub.Apply(ctx, corev1ac.Namespace(own).WithLabels(labels).WithAnnotations(ownAnnotations),
		client.FieldOwner("policy-test"), client.ForceOwnership)).To(Succeed(), "labelling the stub's own namespace again")
	// The same for the stub's Secret: updated, and labelled again.
	ownSecret := func(data string) *corev1ac.SecretApplyConfiguration {
		return corev1ac.Secret("kubeconfig", own).WithLabels(labels).WithAnnotations(ownAnnotations).
			WithType(corev1.SecretTypeOpaque).WithData(map[string][]byte{"kubeconfig": []byte(data)})
	}
	g.Expect(asStub.Apply(ctx, ownSecret("one"), client.FieldOwner("policy-test"), client.ForceOwnership)).To(Succeed())
	g.Expect(asStub.Apply(ctx, ownSecret("two"), client.FieldOwner("policy-test"), client.ForceOwnership)).To(Succeed(), "updating the stub's own Secret")
	g.Expect(env.Client.Patch(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: "kubeconfig"}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}}}`)))).To(Succeed())
	g.Expect(asStub.Apply(ctx, ownSecret("three"), client.FieldOwner("policy-test"), client.ForceOwnership)).To(Succeed(),
		"labelling the stub's own Secret again")
	g.Expect(asStub.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: own}})).To(Succeed())
}
