package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("roots=10:20,crowded=30:5,single=3,helm=4:40")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]int{
		wRoots:   {10, 20},
		wCrowded: {30, 5},
		wSingle:  {3},
		wHelm:    {4, 40},
		wClaims:  defaultSizes[wClaims], // not overridden
	} {
		if !slices.Equal(got[name], want) {
			t.Errorf("%s: got %v, want %v", name, got[name], want)
		}
	}

	for in, wantErr := range map[string]string{
		"crowded=200":   "two sizes, present:new",
		"crowded=1:2:3": "two sizes, present:new",
		"chain=1:2":     "one size only",
		"helm=20":       "one-after-the-other:at-once",
		"roots=0":       "not a positive number",
		"nosuch=1":      "unknown workload",
		"roots":         "want workload=N",
		"single=twenty": "not a positive number",
	} {
		_, err := parseSizes(in)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("parseSizes(%q) = %v, want an error containing %q", in, err, wantErr)
		}
	}
}

func TestNewWorkloadsExpandsSizes(t *testing.T) {
	names := func(name string, sizes []int) []string {
		var out []string
		for _, w := range newWorkloads(name, sizes, 16) {
			out = append(out, w.name)
		}
		return out
	}
	if got := names(wRoots, []int{50, 200}); !slices.Equal(got, []string{"roots-50", "roots-200"}) {
		t.Errorf("roots: %v", got)
	}
	ws := newWorkloads(wCrowded, []int{1000, 200}, 16)
	if len(ws) != 1 || ws[0].name != "crowded-200" || ws[0].roots != 200 || !strings.Contains(ws[0].description, "holds 1000") {
		t.Errorf("crowded: %+v", ws)
	}
	if got := names(wChain, []int{50}); !slices.Equal(got, []string{"chain"}) {
		t.Errorf("chain: %v", got)
	}
}

func TestComponentWorkloadSizes(t *testing.T) {
	got, err := parseSizes("component=7,component-inline=9")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[wComponent], []int{7}) || !slices.Equal(got[wComponentInline], []int{9}) {
		t.Errorf("sizes: %v %v", got[wComponent], got[wComponentInline])
	}
	if defaultSizes[wComponent][0] != 100 || defaultSizes[wComponentInline][0] != 100 {
		t.Errorf("defaults: %v %v", defaultSizes[wComponent], defaultSizes[wComponentInline])
	}
	if _, err := parseSizes("component=1:2"); err == nil || !strings.Contains(err.Error(), "one size only") {
		t.Errorf("two sizes for component: %v", err)
	}
	ws := newWorkloads(wComponent, []int{7}, 16)
	if len(ws) != 1 || ws[0].name != "component-7" || ws[0].roots != 7 || ws[0].account == nil {
		t.Errorf("component: %+v", ws)
	}
}

func TestComponentRatios(t *testing.T) {
	results := []*result{
		{Workload: "component-inline-100", AllSec: 10},
		{Workload: "component-100", AllSec: 12},
		{Workload: "component-50", AllSec: 5}, // no inline twin
		{Workload: "component-inline-7"},      // no times: timed out before the first
		{Workload: "component-7", AllSec: 1},
		{Workload: "roots-100", AllSec: 1},
	}
	got := componentRatios(results)
	if len(got) != 1 || got[0].Component != "component-100" || got[0].Inline != "component-inline-100" || got[0].Ratio != 1.2 {
		t.Fatalf("ratios: %+v", got)
	}
	if s := got[0].String(); !strings.Contains(s, "1.20×") || !strings.Contains(s, "within") {
		t.Errorf("line: %s", s)
	}
	results[1].AllSec, results[1].Error = 14, "fetched 2 times"
	if s := componentRatios(results)[0].String(); !strings.Contains(s, "OVER") || !strings.Contains(s, "FAILED") {
		t.Errorf("over the target, failed: %s", s)
	}
}
