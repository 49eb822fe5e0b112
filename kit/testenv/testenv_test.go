package testenv

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestLoadCRDs(t *testing.T) {
	crds, err := LoadCRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range crds {
		if c.Name == "deployitems.landscaper.gardener.cloud" {
			return
		}
	}
	t.Fatalf("the DeployItem CRD is not among the %d embedded CRDs", len(crds))
}

func TestAssetsDirExplainsMissingBinaries(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	_, err := AssetsDir()
	if err == nil || !strings.Contains(err.Error(), "make build-control-plane") {
		t.Fatalf("AssetsDir with an empty directory: err = %v", err)
	}
}

// TestStart runs a real API server; it needs the binaries from
// `make build-control-plane` (or KUBEBUILDER_ASSETS) and is skipped by -short.
func TestStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and etcd")
	}
	env := StartT(t, nil)

	want, err := LoadCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(env.CRDs) != len(want) {
		t.Errorf("installed %d CRDs, want %d", len(env.CRDs), len(want))
	}

	// Listing a Terrace kind succeeds only once its CRD is established.
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{
		Group: "landscaper.gardener.cloud", Version: "v1alpha1", Kind: "DeployItemList",
	})
	if err := env.Client.List(context.Background(), list, client.InNamespace("default")); err != nil {
		t.Fatalf("listing DeployItems: %v", err)
	}
	if len(env.KubeConfig) == 0 {
		t.Error("KubeConfig is empty")
	}
}
