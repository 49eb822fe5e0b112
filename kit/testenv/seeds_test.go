package testenv_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	apisall "github.com/terrace-dev/terrace/apis/all"
	"github.com/terrace-dev/terrace/kit/testenv"
)

// seedsDir holds the YAML objects of the seed documents, verbatim.
const seedsDir = "../../examples/seeds"

var env *testenv.Env

func TestMain(m *testing.M) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := apisall.AddToScheme(scheme); err != nil {
		panic(err)
	}
	os.Exit(testenv.RunMain(m, scheme, &env))
}

// readObject decodes one YAML file into an unstructured object.
func readObject(t *testing.T, data []byte) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatalf("decoding YAML: %v", err)
	}
	return u
}

// defaultNamespace sets "default" on namespaced objects without one, as kubectl does.
func defaultNamespace(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	mapping, err := env.Client.RESTMapper().RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	if err != nil {
		t.Fatalf("no REST mapping for %s: %v", u.GroupVersionKind(), err)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace && u.GetNamespace() == "" {
		u.SetNamespace(metav1.NamespaceDefault)
	}
}

// TestSeedObjectsApplyVerbatim applies every object of the seed documents with
// strict field validation (an unknown field is an error, not silently pruned),
// reads it back and checks that spec, annotations and top-level data survive
// unchanged. It also decodes each object strictly into its Go type, so the Go
// API knows every field the seeds use.
func TestSeedObjectsApplyVerbatim(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(seedsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("expected the seed objects in %s, found %d files", seedsDir, len(files))
	}
	ctx := context.Background()
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			in := readObject(t, data)
			defaultNamespace(t, in)

			typed, err := env.Scheme.New(in.GroupVersionKind())
			if err != nil {
				t.Fatalf("no Go type for %s: %v", in.GroupVersionKind(), err)
			}
			if err := yaml.UnmarshalStrict(data, typed); err != nil {
				t.Fatalf("the Go type of %s does not cover the seed: %v", in.GetKind(), err)
			}

			if err := env.Client.Create(ctx, in.DeepCopy(), client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
				t.Fatalf("applying the seed object: %v", err)
			}
			t.Cleanup(func() {
				if err := env.Client.Delete(ctx, in.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("cleaning up: %v", err)
				}
			})

			out := &unstructured.Unstructured{}
			out.SetGroupVersionKind(in.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(in), out); err != nil {
				t.Fatal(err)
			}
			for _, field := range []string{"spec", "data", "configurations"} {
				want, _, _ := unstructured.NestedFieldNoCopy(in.Object, field)
				got, _, _ := unstructured.NestedFieldNoCopy(out.Object, field)
				if !equality.Semantic.DeepEqual(want, got) {
					t.Errorf("%s changed on the way through the API server:\nwant %#v\ngot  %#v", field, want, got)
				}
			}
			if !reflect.DeepEqual(in.GetAnnotations(), out.GetAnnotations()) {
				t.Errorf("annotations changed: want %v, got %v", in.GetAnnotations(), out.GetAnnotations())
			}
		})
	}
}

// TestInvalidObjectsAreRefused checks that the schemas refuse bad objects at
// apply time, with a message a person understands.
func TestInvalidObjectsAreRefused(t *testing.T) {
	cases := []struct {
		name    string
		yaml    string
		message string
	}{
		{
			name: "DeploymentTargetClass with an unknown reclaimPolicy",
			yaml: `
apiVersion: appstudio.redhat.com/v1alpha1
kind: DeploymentTargetClass
metadata: {name: sometimes}
spec: {provisioner: appstudio.redhat.com/devsandbox, reclaimPolicy: Sometimes}`,
			message: `spec.reclaimPolicy: Unsupported value: "Sometimes": supported values: "Delete", "Retain"`,
		},
		{
			name: "DeploymentTargetClass without a provisioner",
			yaml: `
apiVersion: appstudio.redhat.com/v1alpha1
kind: DeploymentTargetClass
metadata: {name: no-provisioner}
spec: {reclaimPolicy: Retain}`,
			message: `spec.provisioner: Required value`,
		},
		{
			name: "DeployItem without spec.type",
			yaml: `
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DeployItem
metadata: {name: no-type, namespace: default}
spec:
  config: {apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1, kind: ProviderConfiguration}`,
			message: `spec.type: Required value`,
		},
		{
			name: "DeployItem with a malformed timeout",
			yaml: `
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DeployItem
metadata: {name: bad-timeout, namespace: default}
spec: {type: landscaper.gardener.cloud/mock, timeout: soon}`,
			message: `spec.timeout: Invalid value: "soon": spec.timeout in body should match`,
		},
		{
			name: "DeployItem config without apiVersion and kind",
			yaml: `
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DeployItem
metadata: {name: bare-config, namespace: default}
spec: {type: landscaper.gardener.cloud/mock, config: {phase: Succeeded}}`,
			message: `spec.config.apiVersion: Required value`,
		},
		{
			name: "Execution whose item depends on itself",
			yaml: `
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Execution
metadata: {name: self-dependent, namespace: default}
spec:
  deployItems:
  - name: a
    type: landscaper.gardener.cloud/mock
    dependsOn: [a]
    config: {apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1, kind: ProviderConfiguration}`,
			message: `a deploy item cannot depend on itself`,
		},
		{
			name: "Execution with two items of one name",
			yaml: `
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Execution
metadata: {name: duplicate-items, namespace: default}
spec:
  deployItems:
  - {name: a, type: landscaper.gardener.cloud/mock, config: {apiVersion: v1, kind: ProviderConfiguration}}
  - {name: a, type: landscaper.gardener.cloud/mock, config: {apiVersion: v1, kind: ProviderConfiguration}}`,
			message: `spec.deployItems[1]: Duplicate value`,
		},
		{
			name: "Installation whose inline blueprint lacks blueprint.yaml",
			yaml: `
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Installation
metadata: {name: no-blueprint, namespace: default}
spec:
  blueprint:
    inline:
      filesystem: {README.md: "hello"}`,
			message: `an inline blueprint's filesystem must contain blueprint.yaml`,
		},
		{
			name: "Installation with neither an inline nor a referenced blueprint",
			yaml: `
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Installation
metadata: {name: ref-blueprint, namespace: default}
spec:
  blueprint: {}`,
			message: `spec.blueprint needs exactly one of inline and ref`,
		},
		{
			name: "Installation data import with two sources",
			yaml: `
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Installation
metadata: {name: two-sources, namespace: default}
spec:
  blueprint: {inline: {filesystem: {blueprint.yaml: "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: Blueprint\n"}}}
  imports:
    data:
    - {name: x, dataRef: some-data, secretRef: {name: some-secret, key: x}}`,
			message: `a data import needs exactly one of dataRef, secretRef, configMapRef`,
		},
		{
			name: "Target with inline config and a secretRef",
			yaml: `
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Target
metadata: {name: both, namespace: default}
spec:
  type: landscaper.gardener.cloud/kubernetes-cluster
  config: {kubeconfig: "x"}
  secretRef: {name: s, key: kubeconfig}`,
			message: `a target takes its configuration either inline (config) or from a Secret (secretRef), not both`,
		},
		{
			name: "DeploymentTarget whose claimRef has no name",
			yaml: `
apiVersion: appstudio.redhat.com/v1alpha1
kind: DeploymentTarget
metadata: {name: nameless-claim, namespace: default}
spec:
  deploymentTargetClassName: isolation-level-namespace
  kubernetesCredentials: {apiURL: "https://example.invalid", clusterCredentialsSecret: s}
  claimRef: {}`,
			message: `spec.claimRef.name: Required value`,
		},
		{
			name: "DeploymentTargetClaim without a class",
			yaml: `
apiVersion: appstudio.redhat.com/v1alpha1
kind: DeploymentTargetClaim
metadata: {name: classless, namespace: default}
spec: {}`,
			message: `spec.deploymentTargetClassName: Required value`,
		},
		{
			name: "SpaceRequest without a tier",
			yaml: `
apiVersion: toolchain.dev.openshift.com/v1alpha1
kind: SpaceRequest
metadata: {name: tierless, namespace: default}
spec: {}`,
			message: `spec.tierName: Required value`,
		},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := readObject(t, []byte(tc.yaml))
			err := env.Client.Create(ctx, obj, client.FieldValidation(metav1.FieldValidationStrict))
			if err == nil {
				_ = env.Client.Delete(ctx, obj)
				t.Fatalf("the API server accepted the invalid object; want an error containing %q", tc.message)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error message does not explain the problem:\nwant it to contain %q\ngot %v", tc.message, err)
			}
		})
	}
}
