package execution

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// foreignLabels remembers, per execution and deploy item, the label keys a
// live read of the item (its managedFields) showed this controller does not
// own: labels of users or other managers, which the item's apply would leave
// alone, so an item up to date but for them needs no write. Without the
// record every job would read such an item live again (the cache strips
// managedFields) only to learn the same.
//
// A key found foreign stays so for the object read (its UID) until this
// controller applies the item: only its create (a new object) and its apply
// set labels; its other writes of items are merge patches of annotations and
// status writes, which own no label. So the record is dropped before every
// apply (see updateItem), a new UID (the item deleted and created again)
// makes it void, and it goes with the execution (Reconciler.forget). A
// restarted controller reads the item once more.
//
// It is safe for concurrent use; the zero value is ready.
type foreignLabels struct {
	mu sync.Mutex
	// m: execution → item object name → what was found.
	m map[types.NamespacedName]map[string]foreignLabelsOf
}

type foreignLabelsOf struct {
	uid  types.UID
	keys []string
}

// known reports whether every one of keys was found foreign on di (the same
// object: the UID is compared).
func (f *foreignLabels) known(exec types.NamespacedName, di *lsv1alpha1.DeployItem, keys []string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.m[exec][di.Name]
	if !ok || rec.uid != di.UID {
		return false
	}
	for _, k := range keys {
		if !slices.Contains(rec.keys, k) {
			return false
		}
	}
	return true
}

// remember records that a live read of di showed this controller owns none
// of keys.
func (f *foreignLabels) remember(exec types.NamespacedName, di *lsv1alpha1.DeployItem, keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[types.NamespacedName]map[string]foreignLabelsOf{}
	}
	if f.m[exec] == nil {
		f.m[exec] = map[string]foreignLabelsOf{}
	}
	f.m[exec][di.Name] = foreignLabelsOf{uid: di.UID, keys: slices.Clone(keys)}
}

// drop forgets what was found on the item named item (an apply of it may
// take a label over).
func (f *foreignLabels) drop(exec types.NamespacedName, item string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m[exec], item)
	if len(f.m[exec]) == 0 {
		delete(f.m, exec)
	}
}

// forget forgets the items of an execution that is gone.
func (f *foreignLabels) forget(exec types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, exec)
}
