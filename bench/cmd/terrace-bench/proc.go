package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// procSample is what /proc says about one process at one time.
type procSample struct {
	cpuTicks uint64 // utime + stime
	hwmKB    uint64 // VmHWM: peak resident set size
	rssKB    uint64 // VmRSS
}

func readProc(pid int) (procSample, error) {
	var s procSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after the last ')' start with field 3, the state.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseUint(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("/proc/%d/stat: malformed utime/stime", pid)
	}
	s.cpuTicks = utime + stime

	status, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	defer func() { _ = status.Close() }()
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch key {
		case "VmHWM":
			dst = &s.hwmKB
		case "VmRSS":
			dst = &s.rssKB
		default:
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return s, fmt.Errorf("/proc/%d/status %s: %w", pid, key, err)
		}
		*dst = kb
	}
	return s, sc.Err()
}

// resetPeakRSS sets the process's VmHWM to its current RSS
// (proc(5): writing 5 to /proc/<pid>/clear_refs), so that the peak after a
// workload is that workload's. It reports whether that worked; if not, the
// peak is the process's lifetime peak.
func resetPeakRSS(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}
