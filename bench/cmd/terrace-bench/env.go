package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// controlPlane are the components of hack/local-env.sh that are not Terrace
// binaries, in start order.
var controlPlane = []string{"etcd", "kube-apiserver", "kube-controller-manager", "registry"}

// localEnv drives hack/local-env.sh for the bench's own environment: its own
// directory and ports, so a `make up` of the user runs on beside it.
type localEnv struct {
	root string // repository root
	dir  string // TERRACE_LOCAL_DIR
	out  io.Writer
}

// ports of the bench environment; `make up` uses the defaults of
// hack/local-env.sh (22379, 22380, 26443, 20257, 28080).
var benchPorts = []string{
	"TERRACE_ETCD_PORT=24379",
	"TERRACE_ETCD_PEER_PORT=24380",
	"TERRACE_APISERVER_PORT=28443",
	"TERRACE_KCM_PORT=20457",
	"TERRACE_CONTROLLER_PORT_BASE=30080",
}

// run runs `hack/local-env.sh <command>` in a process group of its own, so a
// Ctrl-C in the terminal reaches only the bench, which then stops the
// environment in order. Cancelling ctx sends the group SIGTERM.
func (e *localEnv) run(ctx context.Context, command string) error {
	cmd := exec.Command(filepath.Join(e.root, "hack", "local-env.sh"), command) //nolint:gosec // our own script
	cmd.Dir = e.root
	cmd.Env = append(append(os.Environ(), "TERRACE_LOCAL_DIR="+e.dir), benchPorts...)
	cmd.Stdout, cmd.Stderr = e.out, e.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("hack/local-env.sh %s: %w", command, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("hack/local-env.sh %s: %w", command, err)
		}
		return nil
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		timer := time.NewTimer(10 * time.Second)
		defer timer.Stop()
		var waitErr error
		select {
		case waitErr = <-done:
		case <-timer.C:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			waitErr = <-done
		}
		return errors.Join(fmt.Errorf("hack/local-env.sh %s: %w", command, ctx.Err()), waitErr)
	}
}

func (e *localEnv) clean(ctx context.Context) error { return e.run(ctx, "clean") }
func (e *localEnv) up(ctx context.Context) error    { return e.run(ctx, "up") }

// down stops the environment; it runs even after the bench was interrupted.
func (e *localEnv) down() error { return e.run(context.Background(), "down") }

func (e *localEnv) kubeconfig() string { return filepath.Join(e.dir, "kubeconfig") }

// component is one process of the environment.
type component struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
}

// components reads <dir>/pids/<component>.pid: the control plane first, then
// the Terrace binaries in name order.
func (e *localEnv) components() ([]component, error) {
	files, err := filepath.Glob(filepath.Join(e.dir, "pids", "*.pid"))
	if err != nil {
		return nil, err
	}
	var out []component
	for _, f := range files {
		raw, err := os.ReadFile(f) //nolint:gosec // the environment's own PID files
		if err != nil {
			return nil, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, component{Name: strings.TrimSuffix(filepath.Base(f), ".pid"), PID: pid})
	}
	rank := func(name string) int {
		if i := slices.Index(controlPlane, name); i >= 0 {
			return i
		}
		return len(controlPlane)
	}
	slices.SortFunc(out, func(a, b component) int {
		if ra, rb := rank(a.Name), rank(b.Name); ra != rb {
			return ra - rb
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(out) <= len(controlPlane) {
		return nil, errors.New("no Terrace binary is running in the bench environment")
	}
	return out, nil
}

// binaries are the Terrace binaries among the components.
func binaries(cs []component) []string {
	var out []string
	for _, c := range cs {
		if !slices.Contains(controlPlane, c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}

// findRoot is the nearest directory at or above the working directory that
// holds go.work.
func findRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.work at or above %s: pass -root", wd)
		}
	}
}
