package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// report is the JSON file of one bench run.
type report struct {
	Started  time.Time   `json:"started"`
	Machine  machineInfo `json:"machine"`
	Commit   string      `json:"commit,omitempty"`
	Flags    string      `json:"flags"`
	QuietFor string      `json:"quietWindow"`
	Results  []*result   `json:"results"`
	// APICost prices single requests (workload apicost).
	APICost []apiCostResult `json:"apiCost,omitempty"`
	// ComponentVsInline compares the component workloads with their inline
	// twins.
	ComponentVsInline []componentRatio `json:"componentVsInline,omitempty"`
}

func newReport(root string) *report {
	return &report{
		Started:  time.Now().UTC(),
		Machine:  machine(),
		Commit:   gitCommit(root),
		Flags:    strings.Join(os.Args[1:], " "),
		QuietFor: quietWindow.String(),
	}
}

// finish prints the summary to w and saves the report in dir, at path.
func (rep *report) finish(w io.Writer, dir string) (path string, err error) {
	if err := rep.writeSummary(w); err != nil {
		return "", err
	}
	return rep.save(dir)
}

// writeSummary prints one line per workload.
func (rep *report) writeSummary(w io.Writer) error {
	if len(rep.Results) == 0 {
		return nil
	}
	p := &printer{w: w}
	p.printf("\n=== summary (%d × %s, %s)\n", rep.Machine.CPUs, rep.Machine.CPUModel, rep.Machine.GoVersion)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	t := &printer{w: tw}
	t.printf("workload\troots\tfirst s\thalf s\tall s\tp50 s\tp90 s\trequests/root\tmax controller peak RSS MiB\n")
	for _, r := range rep.Results {
		p50, p90 := "-", "-"
		if len(r.LatenciesSec) > 0 {
			p50, p90 = fmt.Sprintf("%.3f", r.P50Sec), fmt.Sprintf("%.3f", r.P90Sec)
		}
		maxRSS, maxName := 0.0, ""
		for _, p := range r.Processes {
			if !slices.Contains(controlPlane, p.Name) && p.PeakRSSMB > maxRSS {
				maxRSS, maxName = p.PeakRSSMB, p.Name
			}
		}
		name := r.Workload
		if r.Error != "" {
			name += " (FAILED)"
		}
		t.printf("%s\t%5d\t%7.3f\t%7.3f\t%7.3f\t%5s\t%5s\t%8.1f\t%6.1f (%s)\n", name, r.Roots, r.FirstSec, r.HalfSec, r.AllSec, p50, p90, r.PerRoot, maxRSS, maxName)
	}
	t.flush(tw)
	for _, r := range rep.Results {
		if r.Registry != nil {
			p.printf("%s %s\n", r.Workload, r.Registry)
		}
	}
	rep.ComponentVsInline = componentRatios(rep.Results)
	for _, c := range rep.ComponentVsInline {
		p.printf("%s\n", c)
	}
	return errors.Join(p.err, t.err)
}

// printer keeps the first write error, so a table is written without an
// error check per line.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) flush(tw *tabwriter.Writer) {
	if err := tw.Flush(); p.err == nil {
		p.err = err
	}
}

// save writes the report as <dir>/<timestamp>.json.
func (rep *report) save(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	path := filepath.Join(dir, rep.Started.Format("20060102T150405Z")+".json")
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(data, '\n'), 0o600)
}
