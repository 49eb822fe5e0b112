package spacerequest

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
)

// Names of what the stub writes, and the metadata it marks them with.
const (
	// FieldManager is the server-side apply field manager of everything the
	// stub writes.
	FieldManager = "spacerequest-stub"

	// SpaceRequestAnnotation on a provisioned namespace, ServiceAccount,
	// RoleBinding and kubeconfig Secret names the SpaceRequest they were made
	// for, as "<namespace>/<name>". It links cluster-scoped and cross-namespace
	// objects (which cannot carry an owner reference to a namespaced
	// SpaceRequest) back to it.
	SpaceRequestAnnotation = "toolchain.dev.openshift.com/spacerequest"
	// ManagedByLabel marks every object the stub creates; its watches only
	// look at objects carrying it.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of ManagedByLabel.
	ManagedByValue = "spacerequest-stub"

	// TokenRefreshAtAnnotation on the kubeconfig Secret says (RFC 3339) when
	// the stub requests a new token, at 80% of the token's lifetime.
	TokenRefreshAtAnnotation = "toolchain.dev.openshift.com/token-refresh-at"
	// TokenExpiresAtAnnotation on the kubeconfig Secret says (RFC 3339) when
	// the token in it expires.
	TokenExpiresAtAnnotation = "toolchain.dev.openshift.com/token-expires-at"
	// CredentialsHashAnnotation on the kubeconfig Secret is a hash of what the
	// kubeconfig was built from (server, CA, namespace, ServiceAccount UID);
	// when any of them changes the stub issues a new kubeconfig.
	CredentialsHashAnnotation = "toolchain.dev.openshift.com/credentials-hash"

	// ServiceAccountName is the ServiceAccount created in every provisioned
	// namespace; the kubeconfig authenticates as it.
	ServiceAccountName = "namespace-manager"
	// RoleBindingName binds EditClusterRole to the ServiceAccount.
	RoleBindingName = "namespace-manager-edit"
	// EditClusterRole is the bootstrap ClusterRole granted in the namespace.
	EditClusterRole = "edit"
	// ResourceQuotaName and LimitRangeName are the ResourceQuota and
	// LimitRange in every provisioned namespace, sized by the SpaceRequest's
	// toolchainv1alpha1.NamespaceLimitsAnnotation.
	ResourceQuotaName = "namespace-quota"
	LimitRangeName    = "namespace-limits"
)

// PodSecurityLabels are the Pod Security Admission labels of every
// provisioned namespace: the restricted profile, enforced (and audited and
// warned about) at the latest version of the profile. The tenant's edit role
// cannot write namespaces, so it cannot lift them.
var PodSecurityLabels = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
	"pod-security.kubernetes.io/audit":           "restricted",
	"pod-security.kubernetes.io/audit-version":   "latest",
	"pod-security.kubernetes.io/warn":            "restricted",
	"pod-security.kubernetes.io/warn-version":    "latest",
}

// namespaceLabels are all the labels the stub applies to a namespace.
func namespaceLabels() map[string]string {
	labels := map[string]string{ManagedByLabel: ManagedByValue}
	maps.Copy(labels, PodSecurityLabels)
	return labels
}

// hasAll reports whether labels holds every one of want.
func hasAll(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// maxNameLength is the length limit of a DNS label (namespace names).
const maxNameLength = 63

// Key is the value of SpaceRequestAnnotation for sr.
func Key(sr *toolchainv1alpha1.SpaceRequest) string {
	return sr.Namespace + "/" + sr.Name
}

// NamespaceName is the namespace provisioned for sr: "<namespace>-<name>"
// (dots made dashes, cut to leave room) for people to read, then "-" and 16
// hex characters of a hash of Key(sr) that make it sr's alone. The readable
// part alone is ambiguous across tenants (namespace "a-b" with name "c" and
// namespace "a" with name "b-c" both read "a-b-c"); Key is not, as namespace
// names hold no "/", and 64 bits of hash leave no collision to search for.
func NamespaceName(sr *toolchainv1alpha1.SpaceRequest) string {
	suffix := hashOf(Key(sr))
	readable := strings.ReplaceAll(sr.Namespace+"-"+sr.Name, ".", "-")
	if limit := maxNameLength - len(suffix) - 1; len(readable) > limit {
		readable = strings.TrimRight(readable[:limit], "-")
	}
	return readable + "-" + suffix
}

// SecretName is the kubeconfig Secret of sr, in sr's namespace.
func SecretName(sr *toolchainv1alpha1.SpaceRequest) string {
	return bounded(sr.Name+"-kubeconfig", 253)
}

// bounded returns s if it fits max, else a prefix of s, "-" and 8 hex
// characters of the hash of s.
func bounded(s string, maxLen int) string {
	if len(s) <= maxLen {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	suffix := hex.EncodeToString(sum[:])[:8]
	prefix := strings.TrimRight(s[:maxLen-len(suffix)-1], "-.")
	return prefix + "-" + suffix
}

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
