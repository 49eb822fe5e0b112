package spacerequest

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolchainv1alpha1 "github.com/terrace-dev/terrace/apis/toolchain/v1alpha1"
	"github.com/terrace-dev/terrace/kit/flow"
	"github.com/terrace-dev/terrace/kit/tracing"
)

// applyKubeconfigSecret writes the kubeconfig Secret, with a new token when
// there is none yet, when it is due for refresh, or when anything it was
// built from changed. Otherwise it only schedules the next refresh.
func (r *Reconciler) applyKubeconfigSecret(ctx context.Context, s *scope) (flow.Result, error) {
	ns := NamespaceName(s.sr)
	name := SecretName(s.sr)
	credHash := hashOf(r.TargetClusterURL, string(r.CAData), fmt.Sprint(r.Insecure), ns, ServiceAccountName, string(s.serviceAccountUID))
	now := r.clock()

	found, err := r.findKubeconfigSecret(ctx, s, name, now)
	if err != nil {
		return flow.Continue(), err
	}
	if known := found.meta; known != nil {
		if known.Annotations[SpaceRequestAnnotation] != Key(s.sr) {
			return flow.Continue(), fmt.Errorf("secret %s/%s exists and was not created for this SpaceRequest", s.sr.Namespace, name)
		}
		refreshAt, perr := time.Parse(time.RFC3339, known.Annotations[TokenRefreshAtAnnotation])
		// One that lost the stub's label (read from the API server) is
		// written again, so that the cache holds (and watches) it again.
		if perr == nil && now.Before(refreshAt) && known.Annotations[CredentialsHashAnnotation] == credHash && found.hasData &&
			known.Labels[ManagedByLabel] == ManagedByValue {
			r.remember(secretKey(s.sr.Namespace, name), known.ResourceVersion)
			requeue := refreshAt.Sub(now)
			if found.unseenLeft > 0 {
				// Its event brings the next reconcile; should none come,
				// look again when the record is no longer trusted.
				requeue = min(requeue, found.unseenLeft)
			}
			return flow.Continue().RequeueAfter(requeue), nil
		}
	}

	ctx, span := tracing.StartStep(ctx, tracer(), Kind, "IssueCredentials", attrNamespace.String(ns))
	// A Secret not known to be the stub's is created, not applied: the
	// create fails on one that exists, which is never taken over.
	res, err := r.issueCredentials(ctx, s, ns, name, credHash, now, found.meta == nil)
	tracing.EndStep(span, err)
	return res, err
}

// foundSecret is what the stub knows of a kubeconfig Secret.
type foundSecret struct {
	// meta is the Secret's metadata; nil when there is none of the name.
	meta *metav1.ObjectMeta
	// hasData: the Secret holds a kubeconfig.
	hasData bool
	// unseenLeft is, for a Secret the stub created that the cache has not
	// shown yet, how long the record of its creation is trusted.
	unseenLeft time.Duration
}

// findKubeconfigSecret looks up the kubeconfig Secret. The cache holds its
// metadata only. A copy at the resourceVersion the stub last wrote (or read
// in full) holds the kubeconfig the stub wrote; any other needs a look at
// its data. The cache holds only Secrets with the stub's label: one it does
// not hold is missing or someone else's, or one the stub created moments
// ago that the cache has not shown yet (unseen: what the stub wrote is
// known). It is read, too, if the stub wrote it (then it lost its label, or
// is not cached yet after an apply) or found it was someone else's (so that
// a retry requests no token while it stays so).
func (r *Reconciler) findKubeconfigSecret(ctx context.Context, s *scope, name string, now time.Time) (foundSecret, error) {
	key := secretKey(s.sr.Namespace, name)
	cached := metadataOf(secretGVK)
	err := r.Managed.Get(ctx, client.ObjectKey{Namespace: s.sr.Namespace, Name: name}, cached)
	switch {
	case apierrors.IsNotFound(err):
		if unseen, left, ok := r.unseen.pending(key, now); ok {
			return foundSecret{meta: unseen, hasData: true, unseenLeft: left}, nil
		}
		if !r.tracked(key) {
			return foundSecret{}, nil
		}
	case err != nil:
		return foundSecret{}, fmt.Errorf("reading Secret %s/%s: %w", s.sr.Namespace, name, err)
	case r.isKnown(key, cached.ResourceVersion):
		return foundSecret{meta: &cached.ObjectMeta, hasData: true}, nil
	}
	existing := &corev1.Secret{}
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.sr.Namespace, Name: name}, existing)
	switch {
	case apierrors.IsNotFound(err):
		return foundSecret{}, nil
	case err != nil:
		return foundSecret{}, fmt.Errorf("reading Secret %s/%s: %w", s.sr.Namespace, name, err)
	}
	return foundSecret{meta: &existing.ObjectMeta, hasData: len(existing.Data[toolchainv1alpha1.AdminKubeconfigKey]) > 0}, nil
}

// issueCredentials requests a token for the namespace's ServiceAccount and
// writes the kubeconfig Secret: an apply of the stub's own Secret, or, when
// create is set (no Secret of the stub's was found), a create, which fails on
// a Secret that exists: one not made for this SpaceRequest is an error, the
// stub's own (not cached yet, or its label removed) is applied after all.
func (r *Reconciler) issueCredentials(ctx context.Context, s *scope, ns, name, credHash string, now time.Time, create bool) (flow.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	tr := &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(r.TokenExpiration / time.Second))},
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ServiceAccountName}}
	if err := r.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return flow.Continue(), fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", ns, ServiceAccountName, err)
	}
	expires := tr.Status.ExpirationTimestamp.Time
	lifetime := expires.Sub(now)
	if lifetime <= 0 {
		return flow.Continue(), fmt.Errorf("the token issued for ServiceAccount %s/%s already expired at %s", ns, ServiceAccountName, expires)
	}
	refreshAt := now.Add(lifetime * 4 / 5)

	kubeconfig, err := r.kubeconfig(ns, tr.Status.Token)
	if err != nil {
		return flow.Continue(), err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.sr.Namespace,
			Name:      name,
			Labels:    map[string]string{ManagedByLabel: ManagedByValue},
			Annotations: map[string]string{
				SpaceRequestAnnotation:    Key(s.sr),
				TokenRefreshAtAnnotation:  refreshAt.UTC().Format(time.RFC3339),
				TokenExpiresAtAnnotation:  expires.UTC().Format(time.RFC3339),
				CredentialsHashAnnotation: credHash,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s.sr, toolchainv1alpha1.SchemeGroupVersion.WithKind("SpaceRequest"))},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{toolchainv1alpha1.AdminKubeconfigKey: kubeconfig},
	}
	rv, err := r.writeSecret(ctx, s, secret, create)
	if err != nil {
		return flow.Continue(), err
	}
	r.remember(secretKey(s.sr.Namespace, name), rv)
	log.Info("issued kubeconfig", "secret", name, "namespace", ns, "tokenExpiresAt", expires, "refreshAt", refreshAt)
	if !s.wasReady {
		// First provisioning: the Provisioned event follows.
		return flow.Continue().RequeueAfter(refreshAt.Sub(now)), nil
	}
	r.Recorder.Eventf(s.sr, nil, corev1.EventTypeNormal, EventCredentialsIssued, "Provision",
		"Issued a kubeconfig for namespace %s in Secret %s (token expires %s)", ns, name, expires.UTC().Format(time.RFC3339))
	return flow.Continue().RequeueAfter(refreshAt.Sub(now)), nil
}

// writeSecret creates (create set) or applies the kubeconfig Secret and
// returns the resourceVersion written. A create that finds a Secret of the
// name looks at it: someone else's is an error, the stub's own is applied.
func (r *Reconciler) writeSecret(ctx context.Context, s *scope, secret *corev1.Secret, create bool) (string, error) {
	key := client.ObjectKeyFromObject(secret)
	if create {
		created := secret.DeepCopy()
		err := r.Client.Create(ctx, created, client.FieldOwner(FieldManager))
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return "", fmt.Errorf("creating Secret %s: %w", key, err)
			}
			r.unseen.created(secretKey(key.Namespace, key.Name), created, r.clock())
			return created.ResourceVersion, nil
		}
		existing := metadataOf(secretGVK)
		if err := r.readLive(ctx, key, existing); err != nil {
			return "", fmt.Errorf("reading Secret %s: %w", key, err)
		}
		if existing.Annotations[SpaceRequestAnnotation] != Key(s.sr) {
			r.written.Store(secretKey(key.Namespace, key.Name), "")
			return "", fmt.Errorf("secret %s exists and was not created for this SpaceRequest", key)
		}
	}
	owner := secret.OwnerReferences[0]
	ac := corev1ac.Secret(secret.Name, secret.Namespace).
		WithType(secret.Type).
		WithLabels(secret.Labels).
		WithAnnotations(secret.Annotations).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(owner.APIVersion).
			WithKind(owner.Kind).
			WithName(owner.Name).
			WithUID(owner.UID).
			WithController(true).
			WithBlockOwnerDeletion(true)).
		WithData(secret.Data)
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("applying Secret %s: %w", key, err)
	}
	return ptr.Deref(ac.ResourceVersion, ""), nil
}

// kubeconfig builds a kubeconfig for the namespace's ServiceAccount.
func (r *Reconciler) kubeconfig(namespace, token string) ([]byte, error) {
	const name = "spacerequest"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   r.TargetClusterURL,
		CertificateAuthorityData: r.CAData,
		InsecureSkipTLSVerify:    r.Insecure,
	}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: namespace}
	cfg.CurrentContext = name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kubeconfig: %w", err)
	}
	return data, nil
}
