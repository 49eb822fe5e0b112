// Command terrace-bench is `make bench`: it starts a fresh local environment
// (hack/local-env.sh, in its own directory and on its own ports, every
// controller with its default flags), runs named workloads through every
// process and prints, per workload, the wall time until the first, half and
// all root objects were done, the API requests (kube-apiserver's own counts,
// attributed to each Terrace process, by verb and resource, per root object),
// and CPU seconds and peak RSS per process. Results are also written as JSON
// under .local/bench/. The environment is stopped at the end, also after a
// failure or Ctrl-C (unless -keep).
//
//	terrace-bench [-workloads single,tree,chain,roots,crowded,claims,apicost,chart-manifest,helm,component-inline,component] [-n roots=50:200:1000,crowded=1000:200,single=20,helm=20:100,component=100,...] [-keep]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// serviceAccountNamespace holds the controllers' ServiceAccounts
// (hack/local-env.sh); the bench's target identity lives there too.
const serviceAccountNamespace = "terrace-system"

// targetIdentity is the ServiceAccount in the kubeconfig of the manifest
// workloads' Target: what the manifest deployer sends with it counts as
// "manifest-deployer-target".
const targetIdentity = "manifest-deployer-target"

// Quiet: after a workload, the counters are final once no Terrace process
// has sent a request for quietWindow.
const quietWindow, quietTimeout = 2 * time.Second, 10 * time.Minute

func main() {
	// The informers of the bench log through controller-runtime: quiet.
	ctrllog.SetLogger(logr.Discard())
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "terrace-bench:", err)
		os.Exit(1)
	}
}

type options struct {
	root, dir, out string
	workloads      []string
	sizes          map[string][]int
	keep, reuse    bool
	creators       int
	timeout        time.Duration
}

func parseFlags() (options, error) {
	var o options
	var workloads, sizes string
	flag.StringVar(&workloads, "workloads", strings.Join(allWorkloads, ","), "comma-separated workloads to run: "+strings.Join(allWorkloads, ", "))
	flag.StringVar(&sizes, "n", "", `size overrides, e.g. "roots=50:200,crowded=500:100,single=5,chain=20,claims=50,tree=2" (tree: depth; roots: one run per size; crowded: present:new)`)
	flag.BoolVar(&o.keep, "keep", false, "leave the bench environment running at the end (stop it with TERRACE_LOCAL_DIR=<dir> hack/local-env.sh down)")
	flag.BoolVar(&o.reuse, "reuse", false, "use the environment already running in -dir as it is (e.g. one left by -keep, with controllers restarted with other flags): no clean, no start, no stop")
	flag.StringVar(&o.root, "root", "", "repository root (default: the directory holding go.work)")
	flag.StringVar(&o.dir, "dir", "", "directory of the bench environment (default <root>/.local/bench-env; wiped at start)")
	flag.StringVar(&o.out, "out", "", "directory for the JSON results (default <root>/.local/bench)")
	flag.IntVar(&o.creators, "creators", 16, "concurrent clients creating the root objects of the at-once workloads")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "limit for each workload")
	flag.Parse()
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	for _, w := range strings.Split(workloads, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		if !slices.Contains(allWorkloads, w) {
			return o, fmt.Errorf("-workloads: unknown workload %q (known: %s)", w, strings.Join(allWorkloads, ", "))
		}
		o.workloads = append(o.workloads, w)
	}
	var err error
	if o.sizes, err = parseSizes(sizes); err != nil {
		return o, err
	}
	if o.root == "" {
		if o.root, err = findRoot(); err != nil {
			return o, err
		}
	}
	if o.dir == "" {
		o.dir = filepath.Join(o.root, ".local", "bench-env")
	}
	if o.out == "" {
		o.out = filepath.Join(o.root, ".local", "bench")
	}
	if o.dir, err = filepath.Abs(o.dir); err != nil {
		return o, err
	}
	return o, nil
}

func run() (retErr error) {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	env := &localEnv{root: o.root, dir: o.dir, out: os.Stderr}
	release, err := openEnv(ctx, env, o)
	defer func() { retErr = errors.Join(retErr, release()) }()
	if err != nil {
		return err
	}

	b, err := newBench(ctx, env, o)
	if err != nil {
		return err
	}
	rep := newReport(o.root)
	runErr, err := b.runWorkloads(ctx, o, rep)
	if err != nil {
		return err
	}
	path, err := rep.finish(os.Stdout, o.out)
	if err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Printf("\nresults: %s\n", path)
	return runErr
}

// openEnv starts a fresh bench environment, or with -reuse takes the one
// running; release stops what openEnv started, unless -keep.
func openEnv(ctx context.Context, env *localEnv, o options) (release func() error, err error) {
	release = func() error { return nil }
	if o.reuse {
		fmt.Fprintf(os.Stderr, "==> using the environment running in %s\n", o.dir)
		return release, nil
	}
	fmt.Fprintf(os.Stderr, "==> a fresh bench environment in %s\n", o.dir)
	if err := env.clean(ctx); err != nil {
		return release, err
	}
	release = func() error {
		if o.keep {
			fmt.Fprintf(os.Stderr, "==> the bench environment keeps running: export KUBECONFIG=%s; stop it with TERRACE_LOCAL_DIR=%s hack/local-env.sh down\n", env.kubeconfig(), o.dir)
			return nil
		}
		fmt.Fprintln(os.Stderr, "==> stopping the bench environment")
		return env.down()
	}
	return release, env.up(ctx)
}

// runWorkloads runs o's workloads in order and adds their figures to rep.
// A failed workload joins runErr and the next one runs; err (the results
// cannot be printed) and an interrupt end the run.
func (b *bench) runWorkloads(ctx context.Context, o options, rep *report) (runErr, err error) {
	for _, name := range o.workloads {
		if name == wAPICost {
			if err := b.runAPICost(ctx, o, rep); err != nil {
				runErr = errors.Join(runErr, fmt.Errorf("%s: %w", wAPICost, err))
			}
			continue
		}
		for _, w := range newWorkloads(name, o.sizes[name], o.creators) {
			res := b.measure(ctx, w)
			rep.Results = append(rep.Results, res)
			if err := res.write(os.Stdout); err != nil {
				return runErr, err
			}
			if res.Error != "" {
				runErr = errors.Join(runErr, fmt.Errorf("%s: %s", res.Workload, res.Error))
			}
			if ctx.Err() != nil {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	return runErr, nil
}

// runAPICost prices the requests and prints the prices.
func (b *bench) runAPICost(ctx context.Context, o options, rep *report) error {
	costs, err := b.apiCost(ctx, o.sizes[wAPICost][0], o.creators)
	rep.APICost = costs
	if err != nil {
		return err
	}
	return writeAPICost(os.Stdout, costs)
}
