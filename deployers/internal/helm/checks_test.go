package helm

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	manifestv1alpha2 "github.com/terrace-dev/terrace/apis/deployers/manifest/v1alpha2"
)

// TestRequirementOf: operators as Landscaper writes them (symbols and names,
// any case) and values as JSON or {value: ...} become the manifest
// deployer's.
func TestRequirementOf(t *testing.T) {
	raw := func(vs ...string) []runtime.RawExtension {
		out := make([]runtime.RawExtension, 0, len(vs))
		for _, v := range vs {
			out = append(out, runtime.RawExtension{Raw: []byte(v)})
		}
		return out
	}
	cases := []struct {
		op     string
		values []runtime.RawExtension
		wantOp manifestv1alpha2.ReadinessOperator
		want   []string
	}{
		{"In", raw(`{"value":1}`, `{"value":"a"}`), manifestv1alpha2.ReadinessOperatorIn, []string{"1", "a"}},
		{"!", nil, manifestv1alpha2.ReadinessOperatorNotExists, nil},
		{"DoesNotExist", nil, manifestv1alpha2.ReadinessOperatorNotExists, nil},
		{"=", raw(`"Running"`), manifestv1alpha2.ReadinessOperatorEquals, []string{"Running"}},
		{"notin", raw(`2`, `{"a": 1}`), manifestv1alpha2.ReadinessOperatorNotIn, []string{"2", `{"a":1}`}},
		{"notIn", raw(`true`), manifestv1alpha2.ReadinessOperatorNotIn, []string{"true"}},
	}
	for _, tc := range cases {
		got, err := requirementOf("f", helmv1alpha1.RequirementSpec{JSONPath: ".x", Operator: tc.op, Values: tc.values})
		if err != nil {
			t.Fatalf("%s: %v", tc.op, err)
		}
		if got.Operator != tc.wantOp || !slices.Equal(got.Values, tc.want) {
			t.Errorf("%s: %s %q, want %s %q", tc.op, got.Operator, got.Values, tc.wantOp, tc.want)
		}
	}
	if _, err := requirementOf("f", helmv1alpha1.RequirementSpec{Operator: "in", Values: raw(`{`)}); err == nil {
		t.Error("a value that is not JSON: accepted")
	}
}
