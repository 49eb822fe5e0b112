package lib

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// RESTConfigFromKubeconfig builds a rest.Config from a Target's kubeconfig
// using only what the kubeconfig itself contains. A Target is written by
// whoever may create Targets, but the client runs inside the deployer: a
// kubeconfig that names a file (tokenFile, client-certificate, client-key,
// certificate-authority), an exec plugin or an auth-provider would make
// client-go read the deployer's own files or run commands as the deployer —
// e.g. tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token sends
// the deployer's own token to whatever server the Target names. So such
// kubeconfigs are refused before client-go sees them (its validation already
// opens the files). All users and clusters are checked, not only the current
// context's: that is simpler to reason about and leaves nothing to get wrong.
//
// The client config is built directly from the parsed kubeconfig with empty
// overrides: no KUBECONFIG merge, no KUBERNETES_MASTER default, no in-cluster
// fallback. An empty server is an error, never the deployer's own API server.
func RESTConfigFromKubeconfig(kc []byte) (*rest.Config, error) {
	raw, err := clientcmd.Load(kc)
	if err != nil {
		return nil, err
	}
	if err := checkInlineOnly(raw); err != nil {
		return nil, err
	}
	if raw.CurrentContext == "" {
		return nil, errors.New("current-context is not set")
	}
	kctx, ok := raw.Contexts[raw.CurrentContext]
	if !ok || kctx == nil {
		return nil, fmt.Errorf("current-context %q: no such context", raw.CurrentContext)
	}
	cluster, ok := raw.Clusters[kctx.Cluster]
	if !ok || cluster == nil {
		return nil, fmt.Errorf("context %q: cluster %q not found", raw.CurrentContext, kctx.Cluster)
	}
	if cluster.Server == "" {
		return nil, fmt.Errorf("context %q: cluster %q: server is empty (the deployer never falls back to its own cluster)", raw.CurrentContext, kctx.Cluster)
	}
	if kctx.AuthInfo != "" {
		if _, ok := raw.AuthInfos[kctx.AuthInfo]; !ok {
			return nil, fmt.Errorf("context %q: user %q not found", raw.CurrentContext, kctx.AuthInfo)
		}
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	// Defence in depth: whatever client-go adds in future, a client for a
	// Target must not reference the deployer's files or run plugins.
	if cfg.BearerTokenFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "" ||
		cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.Host == "" {
		return nil, errors.New("the kubeconfig refers to local files, plugins or no server")
	}
	return cfg, nil
}

// checkInlineOnly refuses every user and cluster that refers to local files,
// exec plugins or auth-provider plugins, naming the first offending field in
// a stable (sorted) order.
func checkInlineOnly(raw *clientcmdapi.Config) error {
	const inlineHint = "only inline credentials are allowed (token, client-certificate-data, client-key-data, username/password, certificate-authority-data)"
	for _, name := range slices.Sorted(maps.Keys(raw.AuthInfos)) {
		u := raw.AuthInfos[name]
		if u == nil {
			continue
		}
		var field string
		switch {
		case u.TokenFile != "":
			field = "tokenFile"
		case u.ClientCertificate != "":
			field = "client-certificate"
		case u.ClientKey != "":
			field = "client-key"
		case u.Exec != nil:
			field = "exec"
		case u.AuthProvider != nil:
			field = "auth-provider"
		default:
			continue
		}
		return fmt.Errorf("user %q: %s is not allowed (it would make the deployer use its own files or run plugins); %s", name, field, inlineHint)
	}
	for _, name := range slices.Sorted(maps.Keys(raw.Clusters)) {
		c := raw.Clusters[name]
		if c != nil && c.CertificateAuthority != "" {
			return fmt.Errorf("cluster %q: certificate-authority is not allowed (a file on the deployer's disk); use certificate-authority-data", name)
		}
	}
	return nil
}
