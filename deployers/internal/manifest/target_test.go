package manifest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/internal/manifest"
	"github.com/terrace-dev/terrace/deployers/internal/testutil"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// recordingServer is a TLS server standing in for a cluster a Target names;
// it records what reaches it (the Authorization header, whether a client
// certificate was sent) and answers 500, so a client that got through
// retries instead of finishing.
type recordingServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRecordingServer(t *testing.T) *recordingServer {
	rs := &recordingServer{}
	rs.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		rs.seen = append(rs.seen, fmt.Sprintf("authorization=%s clientCerts=%d", r.Header.Get("Authorization"), len(r.TLS.PeerCertificates)))
		w.WriteHeader(http.StatusInternalServerError)
	}))
	// Ask for (but do not verify) client certificates, so that a client
	// certificate read from a file would be seen.
	rs.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	rs.StartTLS()
	t.Cleanup(rs.Close)
	return rs
}

func (rs *recordingServer) requests() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]string(nil), rs.seen...)
}

// kubeconfigTarget creates a kubernetes-cluster Target with the given kubeconfig.
func kubeconfigTarget(g *WithT, ns, name, kc string) {
	cfg, err := json.Marshal(map[string]string{"kubeconfig": kc})
	g.Expect(err).NotTo(HaveOccurred())
	anyCfg := lsv1alpha1.NewAnyJSON(cfg)
	g.Expect(env.Client.Create(context.Background(), &lsv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       lsv1alpha1.TargetSpec{Type: lsv1alpha1.KubernetesClusterTargetType, Config: &anyCfg},
	})).To(Succeed())
}

// selfSignedPEM returns a certificate and its private key in PEM.
func selfSignedPEM(g *WithT) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "deployer-local"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	g.Expect(err).NotTo(HaveOccurred())
	kder, err := x509.MarshalECPrivateKey(key)
	g.Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// TestTargetKubeconfigMustNotUseDeployerFiles: a Target's kubeconfig runs
// inside the deployer, so one that refers to files on the deployer's disk
// (the deployer's own service-account token, certificates), exec plugins or
// auth-providers is a configuration error — and nothing of it may reach the
// server the Target names. Every file below exists and is valid, so a
// deployer that honoured it would contact the server (the positive control
// shows the server is reachable with inline credentials).
func TestTargetKubeconfigMustNotUseDeployerFiles(t *testing.T) {
	ns, g := setup(t)
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		g.Expect(os.WriteFile(p, data, 0o600)).To(Succeed())
		return p
	}
	tokenFile := write("token", []byte("DEPLOYER-LOCAL-TOKEN"))
	certPEM, keyPEM := selfSignedPEM(g)
	certFile, keyFile := write("client.crt", certPEM), write("client.key", keyPEM)
	certData := quoteB64(certPEM)

	// kubeconfig renders a kubeconfig for srv; cluster and user are the YAML
	// bodies of the current context's cluster and user, extra is appended.
	kubeconfig := func(cluster, user, extra string) string {
		return "apiVersion: v1\nkind: Config\ncurrent-context: x\n" +
			"contexts:\n- name: x\n  context: {cluster: c, user: u}\n" +
			"clusters:\n- name: c\n  cluster: {" + cluster + "}\n" +
			"users:\n- name: u\n  user: {" + user + "}\n" + extra
	}
	insecure := func(srv *recordingServer) string { return "server: " + srv.URL + ", insecure-skip-tls-verify: true" }

	cases := []struct {
		name string
		kc   func(srv *recordingServer) string
		msg  string
	}{
		{"token-file", func(srv *recordingServer) string {
			return kubeconfig(insecure(srv), "tokenFile: "+tokenFile, "")
		}, `user "u": tokenFile`},
		{"token-and-token-file", func(srv *recordingServer) string {
			// client-go would re-read the file and prefer it to the inline token.
			return kubeconfig(insecure(srv), "token: inline, tokenFile: "+tokenFile, "")
		}, `user "u": tokenFile`},
		{"client-cert-files", func(srv *recordingServer) string {
			return kubeconfig(insecure(srv), "client-certificate: "+certFile+", client-key: "+keyFile, "")
		}, `user "u": client-certificate`},
		{"client-key-file", func(srv *recordingServer) string {
			return kubeconfig(insecure(srv), "client-certificate-data: "+certData+", client-key: "+keyFile, "")
		}, `user "u": client-key`},
		{"ca-file", func(srv *recordingServer) string {
			caFile := write(srv.Listener.Addr().String()+".ca", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
			return kubeconfig("server: "+srv.URL+", certificate-authority: "+caFile, "token: inline", "")
		}, `cluster "c": certificate-authority`},
		{"exec", func(srv *recordingServer) string {
			return kubeconfig(insecure(srv), `exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: sh, args: ["-c", "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"FROM-EXEC\"}}'"]}`, "")
		}, `user "u": exec`},
		{"auth-provider", func(srv *recordingServer) string {
			return kubeconfig(insecure(srv), "auth-provider: {name: oidc, config: {idp-issuer-url: "+srv.URL+", client-id: 'x', id-token: 'y'}}", "")
		}, `user "u": auth-provider`},
		{"unused-user", func(srv *recordingServer) string {
			// Every user is checked, not only the current context's.
			return kubeconfig(insecure(srv), "token: inline", "- name: other\n  user: {tokenFile: "+tokenFile+"}\n")
		}, `user "other": tokenFile`},
		{"empty-server", func(*recordingServer) string {
			return kubeconfig("insecure-skip-tls-verify: true", "token: inline", "")
		}, `cluster "c": server is empty`},
	}
	servers := map[string]*recordingServer{}
	for _, c := range cases {
		srv := newRecordingServer(t)
		servers[c.name] = srv
		kubeconfigTarget(g, ns, c.name, c.kc(srv))
		di := item(ns, c.name, c.name, v2(`"manifests":[{"manifest":`+cm(ns, "x", nil)+`}]`))
		// A deployer that got through would retry the 500s; end that early.
		d := lsv1alpha1.Duration("5s")
		di.Spec.Timeout = &d
		g.Expect(env.Client.Create(ctx, di)).To(Succeed(), c.name)
	}
	// Positive control: inline credentials reach the same kind of server.
	control := newRecordingServer(t)
	kubeconfigTarget(g, ns, "inline", kubeconfig(insecure(control), "token: INLINE-TOKEN", ""))
	ctl := item(ns, "inline", "inline", v2(`"manifests":[{"manifest":`+cm(ns, "x", nil)+`}]`))
	d := lsv1alpha1.Duration("5s")
	ctl.Spec.Timeout = &d
	g.Expect(env.Client.Create(ctx, ctl)).To(Succeed())

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := servers[c.name]
			g.Eventually(get(g, item(ns, c.name, "", "")), timeout, interval).
				Should(failedWith(lib.ReasonInvalidConfig, lsv1alpha1.ErrorConfigurationProblem, c.msg),
					func() string { return fmt.Sprintf("requests the Target's server saw: %q", srv.requests()) })
			// The refusal comes before the client is built, so by the time the
			// item is Failed any request would already have been recorded.
			g.Expect(srv.requests()).To(BeEmpty())
		})
	}
	g.Eventually(control.requests, timeout, interval).Should(ContainElement(ContainSubstring("authorization=Bearer INLINE-TOKEN")))
}

// quoteB64 renders data as a base64 YAML scalar (the -data fields' encoding).
func quoteB64(data []byte) string {
	b, _ := json.Marshal(data) // []byte marshals as a base64 JSON string, valid YAML
	return string(b)
}

// TestSelfTarget: a self target reaches the cluster that holds it as its
// ServiceAccount, with a token the deployer mints: the item applies its
// ConfigMap where the ServiceAccount may, and is refused, naming the
// ServiceAccount, where it may not (the deployer's own rights are not used).
func TestSelfTarget(t *testing.T) {
	ns, g := setup(t)
	other := testutil.Namespace(t, env)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "configmaps", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmaps"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "deployer", Namespace: ns}}})).To(Succeed())
	createForm(g, ns, targetForm{name: "self", config: map[string]any{
		"selfConfig": map[string]any{"serviceAccount": map[string]any{"name": "deployer"}, "expirationSeconds": 3600}}})

	allowed := item(ns, "allowed", "self", v2(`"manifests":[{"manifest":`+cm(ns, "app", map[string]string{"v": "1"})+`}]`))
	refused := item(ns, "refused", "self", v2(`"manifests":[{"manifest":`+cm(other, "app", nil)+`}]`))
	g.Expect(env.Client.Create(ctx, allowed)).To(Succeed())
	g.Expect(env.Client.Create(ctx, refused)).To(Succeed())

	g.Eventually(get(g, allowed), timeout, interval).Should(succeeded())
	g.Expect(configMap(g, ns, "app")()).To(Equal(map[string]string{"v": "1"}))
	g.Eventually(get(g, refused), timeout, interval).Should(failedWith(manifest.ReasonRejected, lsv1alpha1.ErrorInsufficientPermission,
		"system:serviceaccount:"+ns+":deployer"))
	g.Expect(configMap(g, other, "app")()).To(BeNil())
}
