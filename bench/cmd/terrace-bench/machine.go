package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// machineInfo is where the figures were taken.
type machineInfo struct {
	CPUs           int    `json:"cpus"`
	CPUModel       string `json:"cpuModel"`
	Memory         string `json:"memory"`
	Kernel         string `json:"kernel"`
	OS             string `json:"os"`
	GoVersion      string `json:"goVersion"`
	LoadAvgAtStart string `json:"loadAvgAtStart"`
}

// machine describes where the figures were taken.
func machine() machineInfo {
	m := machineInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				m.Memory = strings.Join(strings.Fields(strings.TrimPrefix(l, "MemTotal:")), " ")
			}
		}
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(raw))
	}
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvgAtStart = strings.Join(strings.Fields(string(raw))[:3], " ")
	}
	return m
}

// gitCommit is the checked-out commit (without running git: .git/HEAD).
func gitCommit(root string) string {
	head, err := os.ReadFile(filepath.Join(root, ".git", "HEAD"))
	if err != nil {
		return ""
	}
	ref, isRef := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !isRef {
		return ref
	}
	id, err := os.ReadFile(filepath.Join(root, ".git", filepath.FromSlash(ref))) //nolint:gosec // a path inside .git
	if err != nil {
		return ref
	}
	return strings.TrimSpace(string(id))
}
