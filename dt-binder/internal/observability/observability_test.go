package observability

import (
	"testing"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// RegisterMetrics serves the bind histogram of both modes before any bind,
// so a freshly (re)started binder shows it (empty).
func TestRegisterMetricsCreatesBothModes(t *testing.T) {
	RegisterMetrics()
	RegisterMetrics() // idempotent
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != BindDurationName {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "mode" {
					modes[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	want := map[string]uint64{ModeStatic: 0, ModeDynamic: 0}
	if len(modes) != len(want) || modes[ModeStatic] != 0 || modes[ModeDynamic] != 0 {
		t.Errorf("%s series by mode (sample counts) = %v, want %v", BindDurationName, modes, want)
	}
}
