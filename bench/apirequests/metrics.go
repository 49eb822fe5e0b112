package apirequests

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Sample is one sample of the Prometheus text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseMetrics reads the samples of the named metrics (all when names is
// empty) from the Prometheus text exposition format as kube-apiserver writes
// it (no timestamps; label values may hold \", \\ and \n escapes).
func ParseMetrics(text string, names ...string) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			return nil, fmt.Errorf("malformed metric line %q", line)
		}
		name := line[:end]
		if len(names) > 0 && !slices.Contains(names, name) {
			continue
		}
		rest := line[end:]
		labels := map[string]string{}
		if rest[0] == '{' {
			var err error
			rest, err = parseLabels(rest[1:], labels)
			if err != nil {
				return nil, fmt.Errorf("%w in %q", err, line)
			}
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("no value in %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("malformed value in %q: %w", line, err)
		}
		out = append(out, Sample{Name: name, Labels: labels, Value: v})
	}
	return out, sc.Err()
}

// parseLabels reads `k="v",...}` into labels and returns what follows the '}'.
func parseLabels(s string, labels map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " ,")
		if s == "" {
			return "", fmt.Errorf("unterminated labels")
		}
		if s[0] == '}' {
			return s[1:], nil
		}
		eq := strings.Index(s, `="`)
		if eq < 0 {
			return "", fmt.Errorf("malformed labels")
		}
		key := s[:eq]
		s = s[eq+2:]
		var val strings.Builder
		i := 0
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			val.WriteByte(s[i])
		}
		if i == len(s) {
			return "", fmt.Errorf("unterminated label value")
		}
		labels[key] = val.String()
		s = s[i+1:]
	}
}
