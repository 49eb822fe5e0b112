package v1alpha1

import (
	"strings"
	"testing"
)

func TestParseNamespaceLimitsFillsDefaultsAndRoundTrips(t *testing.T) {
	l, err := ParseNamespaceLimits(`{"cpu":"8","pods":"50"}`)
	if err != nil {
		t.Fatal(err)
	}
	if l.CPU.String() != "8" || l.Pods.String() != "50" || l.Memory.String() != "4Gi" || l.ContainerCPU.String() != "500m" {
		t.Fatalf("got %s", l)
	}
	again, err := ParseNamespaceLimits(l.String())
	if err != nil || again.String() != l.String() {
		t.Fatalf("round trip: %s, %v; want %s", again, err, l)
	}
	if def, err := ParseNamespaceLimits(`{}`); err != nil || def.String() != DefaultNamespaceLimits().String() {
		t.Fatalf("empty: %s, %v", def, err)
	}
}

func TestParseNamespaceLimitsRefusesWhatCannotWork(t *testing.T) {
	for value, want := range map[string]string{
		`{"cpu":"-1"}`:                "cpu must not be negative",
		`{"pods":"1500m"}`:            "pods must be a whole number",
		`{"cpus":"4"}`:                "unknown field",
		`{"cpu":"lots"}`:              "quantities must match",
		`{"containerCPURequest":"1"}`: "containerCPURequest (1) must not exceed containerCPU (500m)",
		`{"memory":"256Mi"}`:          "containerMemory (512Mi) must not exceed memory (256Mi)",
		`{"cpu":"1"} {"cpu":"2"}`:     "unexpected data",
		`not json`:                    "invalid character",
	} {
		_, err := ParseNamespaceLimits(value)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseNamespaceLimits(%s) = %v, want an error containing %q", value, err, want)
		}
	}
}
