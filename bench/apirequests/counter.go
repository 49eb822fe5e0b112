package apirequests

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Other is the Verb and Resource of a process's requests that no rule names.
const Other = "other"

// Key is one line of a breakdown.
type Key struct {
	Process string `json:"process"`
	// Verb is the request's RBAC verb (server-side apply is "patch"), or Other.
	Verb string `json:"verb"`
	// Resource is "<resource>[.<group>][/<subresource>]", "*" for any, or Other.
	Resource string `json:"resource"`
}

// Counter reads the counts of the FlowSchemas Install created.
type Counter struct {
	cs        kubernetes.Interface
	schemas   map[string]Key
	processes []string
}

// Processes are the names of the processes, in the order Install got them.
func (c *Counter) Processes() []string { return slices.Clone(c.processes) }

// Scrape reads kube-apiserver's /metrics.
func (c *Counter) Scrape(ctx context.Context) (*Snapshot, error) {
	return Scrape(ctx, c.cs)
}

// Delta is what each process sent between two snapshots.
func (c *Counter) Delta(before, after *Snapshot) Counts {
	out := Counts{}
	for name, key := range c.schemas {
		if n := int(after.FlowSchemas[name] - before.FlowSchemas[name]); n != 0 {
			out[key] += n
		}
	}
	return out
}

// Totals is what each process has sent in all (since Install), by process.
func (c *Counter) Totals(s *Snapshot) map[string]int {
	out := map[string]int{}
	for _, p := range c.processes {
		out[p] = 0
	}
	for name, key := range c.schemas {
		out[key.Process] += int(s.FlowSchemas[name])
	}
	return out
}

// WaitQuiet waits until no process has sent a request for window, or
// timeout passed (an error then). Metrics cannot be watched: it scrapes every
// 500ms (kube-apiserver's /metrics is megabytes; scraping it costs CPU).
func (c *Counter) WaitQuiet(ctx context.Context, window, timeout time.Duration) error {
	var last map[string]int
	lastChange := time.Now()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		s, err := c.Scrape(ctx)
		if err != nil {
			return err
		}
		cur := c.Totals(s)
		if !maps.Equal(cur, last) {
			last, lastChange = cur, time.Now()
		} else if time.Since(lastChange) >= window {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the processes still sent requests after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Counts are requests by process, verb and resource.
type Counts map[Key]int

// Total is the sum of all counts.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// ByProcess sums the counts by process.
func (c Counts) ByProcess() map[string]int {
	out := map[string]int{}
	for k, v := range c {
		out[k.Process] += v
	}
	return out
}

// Entry is one line of Counts.
type Entry struct {
	Key
	Count int `json:"count"`
}

// Entries are the counts, largest first.
func (c Counts) Entries() []Entry {
	out := make([]Entry, 0, len(c))
	for k, v := range c {
		out = append(out, Entry{Key: k, Count: v})
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		if a.Process != b.Process {
			return strings.Compare(a.Process, b.Process)
		}
		if a.Resource != b.Resource {
			return strings.Compare(a.Resource, b.Resource)
		}
		return strings.Compare(a.Verb, b.Verb)
	})
	return out
}

// Write prints the counts as a table, largest first, each line indented by
// indent; per > 0 adds a column with the count divided by per.
func (c Counts) Write(w io.Writer, indent string, per float64) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range c.Entries() {
		var err error
		if per > 0 {
			_, err = fmt.Fprintf(tw, "%s%6d\t%8.2f\t%s\t%s\t%s\n", indent, e.Count, float64(e.Count)/per, e.Process, e.Verb, e.Resource)
		} else {
			_, err = fmt.Fprintf(tw, "%s%6d\t%s\t%s\t%s\n", indent, e.Count, e.Process, e.Verb, e.Resource)
		}
		if err != nil {
			return err
		}
	}
	return tw.Flush()
}
