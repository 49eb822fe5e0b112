package execution

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/execution-controller/internal/depgraph"
	"github.com/terrace-dev/terrace/kit/flow"
)

// itemDependsOn reads the dependencies recorded on an item, which is all
// that is left of an orphan's position in the graph once it left the spec.
func itemDependsOn(di *lsv1alpha1.DeployItem) []string {
	v := di.Annotations[lsv1alpha1.DependsOnAnnotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// specGraph is the dependency graph of the execution's spec.
func specGraph(exec *lsv1alpha1.Execution) depgraph.Graph {
	g := depgraph.Graph{}
	for _, t := range exec.Spec.DeployItems {
		g[t.Name] = t.DependsOn
	}
	return g
}

// specItemRefs are the references of the spec's items, sorted by item name:
// what a job records in status.deployItemRefs when it starts, as its item set.
func specItemRefs(exec *lsv1alpha1.Execution) []lsv1alpha1.NamedObjectReference {
	refs := make([]lsv1alpha1.NamedObjectReference, 0, len(exec.Spec.DeployItems))
	for _, t := range exec.Spec.DeployItems {
		refs = append(refs, lsv1alpha1.NamedObjectReference{Name: t.Name, Reference: lsv1alpha1.ObjectReference{
			Name: ItemObjectName(exec.Name, t.Name), Namespace: exec.Namespace,
		}})
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Name < refs[j].Name })
	return refs
}

// jobItems is the item set of the running (or last) install job, by item
// name: status.deployItemRefs, recorded from the spec when the job started.
// Items added to the spec since wait for the next job; items removed since
// are still the job's (see jobGraph).
func jobItems(exec *lsv1alpha1.Execution) map[string]bool {
	out := make(map[string]bool, len(exec.Status.DeployItemReferences))
	for _, ref := range exec.Status.DeployItemReferences {
		out[ref.Name] = true
	}
	return out
}

// template returns the spec entry named name, or nil.
func template(exec *lsv1alpha1.Execution, name string) *lsv1alpha1.DeployItemTemplate {
	for i := range exec.Spec.DeployItems {
		if exec.Spec.DeployItems[i].Name == name {
			return &exec.Spec.DeployItems[i]
		}
	}
	return nil
}

// jobGraph is the dependency graph of the running job's item set. An item's
// dependencies are the ones it was created or updated with when the job
// started (its depends-on annotation: no item is updated mid-job), so an
// edit of dependsOn mid-job waits for the next job like any other edit. An
// item of the set that does not exist (deleted by hand mid-job, or never
// created) takes its dependencies from its spec entry, from which it is
// (re)created; one whose spec entry is gone too cannot be created: it is
// dropped from the job (returned in dropped), and an item depending on it
// cannot start in this job (see progress).
func jobGraph(s *scope) (g depgraph.Graph, dropped []string) {
	g = depgraph.Graph{}
	for _, ref := range s.exec.Status.DeployItemReferences {
		n := ref.Name
		if di := s.items[n]; di != nil {
			g[n] = itemDependsOn(di)
		} else if t := template(s.exec, n); t != nil {
			g[n] = t.DependsOn
		} else {
			dropped = append(dropped, n)
		}
	}
	return g, dropped
}

// loadItems reads the execution's items from the cache.
func (r *Reconciler) loadItems(ctx context.Context, s *scope) (flow.Result, error) {
	list := &lsv1alpha1.DeployItemList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.exec.Namespace), client.MatchingFields{OwnerIndex: s.exec.Name}); err != nil {
		return flow.Continue(), fmt.Errorf("listing deploy items: %w", err)
	}
	s.items = map[string]*lsv1alpha1.DeployItem{}
	for i := range list.Items {
		di := &list.Items[i]
		if ref := metav1.GetControllerOf(di); ref == nil || ref.UID != s.exec.UID {
			continue // a namesake from an earlier execution of that name
		}
		s.items[itemName(di)] = di
	}
	return flow.Continue(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
