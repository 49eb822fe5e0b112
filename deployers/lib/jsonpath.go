package lib

import (
	"strings"

	"k8s.io/client-go/util/jsonpath"
)

// JSONPathValue evaluates a JSONPath ("{.a.b}" or ".a.b") on obj, as
// readiness checks and exports name a field; found is false when the path
// does not exist. A path matching several values yields them as a list.
func JSONPathValue(obj map[string]any, path string) (value any, found bool, err error) {
	p := strings.TrimSpace(path)
	if !strings.HasPrefix(p, "{") {
		p = "{" + p + "}"
	}
	jp := jsonpath.New("path")
	if err := jp.Parse(p); err != nil {
		return nil, false, err
	}
	results, err := jp.FindResults(obj)
	if err != nil {
		if strings.Contains(err.Error(), "is not found") {
			return nil, false, nil
		}
		return nil, false, err
	}
	if len(results) == 0 || len(results[0]) == 0 {
		return nil, false, nil
	}
	if len(results[0]) == 1 {
		return results[0][0].Interface(), true, nil
	}
	vals := make([]any, 0, len(results[0]))
	for _, r := range results[0] {
		vals = append(vals, r.Interface())
	}
	return vals, true, nil
}
