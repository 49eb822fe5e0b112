package testenv_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// minimalBlueprint is an inline blueprint the schema accepts.
const minimalBlueprint = "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: Blueprint\n"

// name returns a DNS-subdomain-shaped name of n bytes.
func name(n int) string { return strings.Repeat("a", n) }

func installation(objName string, spec map[string]any) *unstructured.Unstructured {
	if _, ok := spec["blueprint"]; !ok {
		spec["blueprint"] = map[string]any{"inline": map[string]any{"filesystem": map[string]any{"blueprint.yaml": minimalBlueprint}}}
	}
	return object("Installation", objName, map[string]any{"spec": spec})
}

func execution(objName string, item map[string]any) *unstructured.Unstructured {
	base := map[string]any{
		"name": "a", "type": "landscaper.gardener.cloud/mock",
		"config": map[string]any{"apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1", "kind": "ProviderConfiguration"},
	}
	for k, v := range item {
		base[k] = v
	}
	return object("Execution", objName, map[string]any{"spec": map[string]any{"deployItems": []any{base}}})
}

func object(kind, objName string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetAPIVersion("landscaper.gardener.cloud/v1alpha1")
	u.SetKind(kind)
	u.SetName(objName)
	u.SetNamespace(metav1.NamespaceDefault)
	return u
}

// targetImports is n target imports with distinct names.
func targetImports(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"name": fmt.Sprintf("t%d", i), "target": fmt.Sprintf("target-%d", i)}
	}
	return out
}

// dataExports is n data exports with distinct names.
func dataExports(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"name": fmt.Sprintf("e%d", i), "dataRef": fmt.Sprintf("data-%d", i)}
	}
	return out
}

// stringMap is n entries key<i>: value.
func stringMap(n int, value string) map[string]any {
	out := make(map[string]any, n)
	for i := range n {
		out[fmt.Sprintf("key%d", i)] = value
	}
	return out
}

// TestTenantSizedFieldsAreBounded checks that the schemas refuse an
// over-long name, reference, type or list at apply time, and that the
// message names the field and its bound.
func TestTenantSizedFieldsAreBounded(t *testing.T) {
	filesystem := stringMap(1001, "x")
	filesystem["blueprint.yaml"] = minimalBlueprint
	cases := []struct {
		name    string
		obj     *unstructured.Unstructured
		message string
	}{
		{
			name:    "Installation context name",
			obj:     installation("long-context", map[string]any{"context": name(254)}),
			message: "spec.context: Too long: may not be more than 253 bytes",
		},
		{
			name:    "Installation target imports",
			obj:     installation("many-imports", map[string]any{"imports": map[string]any{"targets": targetImports(257)}}),
			message: "spec.imports.targets: Too many: 257: must have at most 256 items",
		},
		{
			name: "Installation secret import key",
			obj: installation("long-key", map[string]any{"imports": map[string]any{"data": []any{
				map[string]any{"name": "x", "secretRef": map[string]any{"name": "s", "key": name(254)}},
			}}}),
			message: "spec.imports.data[0].secretRef.key: Too long: may not be more than 253 bytes",
		},
		{
			name:    "Installation data exports",
			obj:     installation("many-exports", map[string]any{"exports": map[string]any{"data": dataExports(257)}}),
			message: "spec.exports.data: Too many: 257: must have at most 256 items",
		},
		{
			name: "Installation inline blueprint files",
			obj: installation("many-files", map[string]any{"blueprint": map[string]any{
				"inline": map[string]any{"filesystem": filesystem},
			}}),
			message: "spec.blueprint.inline.filesystem: Too many: 1002: must have at most 1000 items",
		},
		{
			name:    "Execution deploy item labels",
			obj:     execution("many-labels", map[string]any{"labels": stringMap(129, "v")}),
			message: "spec.deployItems[0].labels: Too many: 129: must have at most 128 items",
		},
		{
			name:    "Execution deploy item label value",
			obj:     execution("long-label", map[string]any{"labels": map[string]any{"k": name(64)}}),
			message: "label keys are at most 317 bytes (a 253-byte prefix, '/', a 63-byte name) and label values at most 63 bytes",
		},
		{
			name:    "Execution deploy item target name",
			obj:     execution("long-target", map[string]any{"target": map[string]any{"name": name(254)}}),
			message: "spec.deployItems[0].target.name: Too long: may not be more than 253 bytes",
		},
		{
			name:    "Execution deploy item type",
			obj:     execution("long-type", map[string]any{"type": name(254)}),
			message: "spec.deployItems[0].type: Too long: may not be more than 253 bytes",
		},
		{
			name:    "DeployItem target namespace",
			obj:     object("DeployItem", "long-namespace", map[string]any{"spec": map[string]any{"type": "t", "target": map[string]any{"name": "x", "namespace": name(64)}}}),
			message: "spec.target.namespace: Too long: may not be more than 63 bytes",
		},
		{
			name:    "DeployItem timeout",
			obj:     object("DeployItem", "long-timeout", map[string]any{"spec": map[string]any{"type": "t", "timeout": strings.Repeat("1", 64) + "s"}}),
			message: "spec.timeout: Too long: may not be more than 64 bytes",
		},
		{
			name:    "Target type",
			obj:     object("Target", "long-type", map[string]any{"spec": map[string]any{"type": name(254)}}),
			message: "spec.type: Too long: may not be more than 253 bytes",
		},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(ctx, tc.obj, client.FieldValidation(metav1.FieldValidationStrict))
			if err == nil {
				_ = env.Client.Delete(ctx, tc.obj)
				t.Fatalf("the API server accepted the over-long object; want an error containing %q", tc.message)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("the error does not name the bound:\nwant it to contain %q\ngot %v", tc.message, err)
			}
		})
	}
}

// TestFieldsAtTheirBoundsApply checks that the bounds are limits, not
// targets to miss: an object with every bounded field at its bound applies.
func TestFieldsAtTheirBoundsApply(t *testing.T) {
	filesystem := stringMap(999, "x")
	filesystem["blueprint.yaml"] = minimalBlueprint
	objs := []*unstructured.Unstructured{
		installation("at-bounds", map[string]any{
			"context":   name(253),
			"blueprint": map[string]any{"inline": map[string]any{"filesystem": filesystem}},
			"imports":   map[string]any{"targets": targetImports(256)},
			"exports":   map[string]any{"data": dataExports(256)},
		}),
		execution("at-bounds", map[string]any{
			"type": name(253), "labels": stringMap(128, name(63)),
			"target": map[string]any{"name": name(253), "namespace": name(63)},
		}),
	}
	ctx := context.Background()
	for _, obj := range objs {
		if err := env.Client.Create(ctx, obj, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			t.Fatalf("%s at its bounds refused: %v", obj.GetKind(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
	}
}

// TestExampleObjectsApply applies the Landscaper objects of examples/ (real
// installations with inline blueprints, imports, exports and a Target) with
// strict field validation: the bounds leave them alone.
func TestExampleObjectsApply(t *testing.T) {
	files := []string{
		"../../examples/landscape/target.yaml",
		"../../examples/landscape/installation.yaml",
		"../../examples/helm-chart/installation.yaml",
		"../../examples/component-landscape/installation.yaml",
		"../../examples/provisioned-namespace/installation.yaml",
	}
	ctx := context.Background()
	for _, file := range files {
		t.Run(filepath.Base(filepath.Dir(file))+"/"+filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(data, &obj.Object); err != nil {
				t.Fatal(err)
			}
			// Applied in default: the examples' namespaces are not created here.
			obj.SetNamespace(metav1.NamespaceDefault)
			obj.SetName(obj.GetName() + "-" + strings.TrimSuffix(filepath.Base(file), ".yaml"))
			if err := env.Client.Create(ctx, obj, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
				t.Fatalf("applying the example: %v", err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
		})
	}
}
