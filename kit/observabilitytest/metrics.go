// Package observabilitytest helps the tests of Terrace controllers read what
// a controller reports besides its objects: the Prometheus series in
// controller-runtime's registry (where kit/metrics and every controller
// register) and the Events it records. It is imported from _test.go files
// only.
//
// The helpers read and return; the assertions stay in the tests. A helper
// that reads through the API server or the registry takes a Gomega and fails
// it on a read error, so it may be used inside Eventually.
//
// Tracing has its own test helpers in kit/tracing/tracingtest.
package observabilitytest

import (
	"fmt"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/terrace-dev/terrace/kit/metrics"
)

// PhaseGauge is the name of kit/metrics' per-object phase gauge.
const PhaseGauge = "terrace_object_phase"

// Family returns the metric family name of controller-runtime's registry,
// nil when the registry has no series of that name.
func Family(g gomega.Gomega, name string) *dto.MetricFamily {
	mfs, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// Labels returns the labels of m by name.
func Labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// hasLabels reports whether m carries every label of want with its value.
func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := Labels(m)
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// Counter returns the value of the first series of counter name whose labels
// include labels (nil: any series); 0 when there is none.
func Counter(g gomega.Gomega, name string, labels map[string]string) float64 {
	for _, m := range Family(g, name).GetMetric() {
		if hasLabels(m, labels) {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// HistogramCount returns the sample count of the first series of histogram
// name whose labels include labels (nil: any series); 0 when there is none.
func HistogramCount(g gomega.Gomega, name string, labels map[string]string) uint64 {
	for _, m := range Family(g, name).GetMetric() {
		if hasLabels(m, labels) {
			return m.GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// InNamespace gathers the series of controller-runtime's registry whose
// namespace label is ns (kit/metrics' per-object series carry it), for
// prometheus/testutil's GatherAndCount and the like. A family without such
// series is left out.
func InNamespace(ns string) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := ctrlmetrics.Registry.Gather()
		var out []*dto.MetricFamily
		for _, mf := range mfs {
			var keep []*dto.Metric
			for _, m := range mf.GetMetric() {
				if Labels(m)[metrics.LabelNamespace] == ns {
					keep = append(keep, m)
				}
			}
			if len(keep) > 0 {
				mf.Metric = keep
				out = append(out, mf)
			}
		}
		return out, err
	})
}

// PhaseSeries lists every series of the per-object phase gauge in namespace
// ns as "<kind> <name> <phase>", whatever its value.
func PhaseSeries(g gomega.Gomega, ns string) []string {
	var out []string
	for _, m := range Family(g, PhaseGauge).GetMetric() {
		if l := Labels(m); l[metrics.LabelNamespace] == ns {
			out = append(out, fmt.Sprintf("%s %s %s", l[metrics.LabelKind], l[metrics.LabelName], l[metrics.LabelPhase]))
		}
	}
	return out
}

// ObjectPhases returns the phases of the object ns/name of kind whose
// per-object phase series has the value 1.
func ObjectPhases(g gomega.Gomega, ns, kind, name string) []string {
	var phases []string
	for _, m := range Family(g, PhaseGauge).GetMetric() {
		l := Labels(m)
		if l[metrics.LabelNamespace] == ns && l[metrics.LabelKind] == kind && l[metrics.LabelName] == name && m.GetGauge().GetValue() == 1 {
			phases = append(phases, l[metrics.LabelPhase])
		}
	}
	return phases
}
