package blueprint

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ImportedTargets are the Target objects an installation's target imports
// resolve to, by import name: single targets, targetLists and targetMaps.
type ImportedTargets struct {
	Single map[string]string
	Lists  map[string][]string
	Maps   map[string]map[string]string
}

// ListMember is the name a sub-installation gives one Target of its
// parent's targetList import: "<import>[<index>]"; the parent's context
// holds a copy of it under that name.
func ListMember(list string, index int) string { return list + "[" + strconv.Itoa(index) + "]" }

// MapMember is ListMember for an entry of a targetMap import: "<import>[<key>]".
func MapMember(m, key string) string { return m + "[" + key + "]" }

// GroupOf returns the import a ListMember or MapMember name belongs to, and
// whether it is one.
func GroupOf(member string) (string, bool) {
	i := strings.IndexByte(member, '[')
	if i <= 0 || !strings.HasSuffix(member, "]") {
		return "", false
	}
	return member[:i], true
}

// itemTarget is a deploy item's target as a deploy execution writes it.
type itemTarget struct {
	Import    string `json:"import,omitempty"`
	Index     *int   `json:"index,omitempty"`
	Key       string `json:"key,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// resolve returns the name of the Target a deploy item's target.import
// (with index or key for a targetList or targetMap import) refers to.
func (t ImportedTargets) resolve(ref *itemTarget) (string, error) {
	if name, ok := t.Single[ref.Import]; ok {
		if ref.Index != nil || ref.Key != "" {
			return "", fmt.Errorf("target import %q is a single target: target.index and target.key are for targetList and targetMap imports", ref.Import)
		}
		return name, nil
	}
	if list, ok := t.Lists[ref.Import]; ok {
		switch {
		case ref.Index == nil:
			return "", fmt.Errorf("target import %q is a targetList: target.index says which of its %d targets", ref.Import, len(list))
		case *ref.Index < 0 || *ref.Index >= len(list):
			return "", fmt.Errorf("target.index %d: targetList import %q has %d targets (indexes 0 to %d)", *ref.Index, ref.Import, len(list), len(list)-1)
		}
		return list[*ref.Index], nil
	}
	if m, ok := t.Maps[ref.Import]; ok {
		if ref.Key == "" {
			return "", fmt.Errorf("target import %q is a targetMap: target.key says which of its targets (keys: %s)", ref.Import, keyList(m))
		}
		name, ok := m[ref.Key]
		if !ok {
			return "", fmt.Errorf("target.key %q: targetMap import %q has no such key (its keys: %s)", ref.Key, ref.Import, keyList(m))
		}
		return name, nil
	}
	return "", fmt.Errorf("target import %q is not a target import of this installation", ref.Import)
}

func keyList(m map[string]string) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
