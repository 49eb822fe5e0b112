package installation

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
	"github.com/terrace-dev/terrace/kit/flow"
)

// readTargetImport reads one target import into im: a single Target
// (target), a targetList (targets) or a targetMap (targetMap). A
// sub-installation's targetListRef and targetMapRef are expanded by its
// parent into targets and targetMap of its context copies (expandGroupRefs);
// left in a spec they name no parent import.
func (r *Reconciler) readTargetImport(ctx context.Context, reads importReads, inst *lsv1alpha1.Installation, scope string, t lsv1alpha1.TargetImport, im *imports) (blueprint.ProvidedTarget, error) {
	switch {
	case t.Target != "":
		tgt, err := r.readTarget(ctx, reads, inst.Namespace, scope, fmt.Sprintf("target import %q", t.Name), t.Target, im)
		if err != nil {
			return blueprint.ProvidedTarget{}, err
		}
		im.targets[t.Name] = tgt
		im.imported.Single[t.Name] = tgt.Name
		im.values[t.Name] = targetValue(tgt)
		return blueprint.ProvidedTarget{Kind: blueprint.TypeTarget, Types: map[string]string{"": tgt.Spec.Type}}, nil
	case t.Targets != nil:
		return r.readTargetList(ctx, reads, inst, scope, t, im)
	case t.TargetMap != nil:
		return r.readTargetMap(ctx, reads, inst, scope, t, im)
	case t.TargetListReference != "" || t.TargetMapReference != "":
		field, ref := "targetListRef", t.TargetListReference
		if ref == "" {
			field, ref = "targetMapRef", t.TargetMapReference
		}
		if scope == "" {
			return blueprint.ProvidedTarget{}, flow.Stalledf(ReasonImportInvalid, "target import %q: %s %q names an import of the parent installation, and a root installation has none: list the Targets in targets (or targetMap)", t.Name, field, ref)
		}
		return blueprint.ProvidedTarget{}, flow.Stalledf(ReasonImportInvalid, "target import %q: %s %q: parent installation %s has no such import", t.Name, field, ref, scope)
	}
	return blueprint.ProvidedTarget{}, flow.Stalledf(ReasonImportInvalid, "target import %q names no Target (target, targets, targetListRef, targetMap or targetMapRef)", t.Name)
}

func (r *Reconciler) readTargetList(ctx context.Context, reads importReads, inst *lsv1alpha1.Installation, scope string, t lsv1alpha1.TargetImport, im *imports) (blueprint.ProvidedTarget, error) {
	p := blueprint.ProvidedTarget{Kind: blueprint.TypeTargetList, Types: map[string]string{}}
	names := make([]string, 0, len(t.Targets))
	values := make([]any, 0, len(t.Targets))
	for i, ref := range t.Targets {
		tgt, err := r.readTarget(ctx, reads, inst.Namespace, scope, fmt.Sprintf("target import %q: targets[%d]", t.Name, i), ref, im)
		if err != nil {
			return p, err
		}
		im.targets[blueprint.ListMember(t.Name, i)] = tgt
		p.Types["["+strconv.Itoa(i)+"]"] = tgt.Spec.Type
		names = append(names, tgt.Name)
		values = append(values, targetValue(tgt))
	}
	im.groups[t.Name] = blueprint.TypeTargetList
	im.imported.Lists[t.Name] = names
	im.values[t.Name] = values
	return p, nil
}

func (r *Reconciler) readTargetMap(ctx context.Context, reads importReads, inst *lsv1alpha1.Installation, scope string, t lsv1alpha1.TargetImport, im *imports) (blueprint.ProvidedTarget, error) {
	p := blueprint.ProvidedTarget{Kind: blueprint.TypeTargetMap, Types: map[string]string{}}
	keys := make([]string, 0, len(t.TargetMap))
	for k := range t.TargetMap {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	names := map[string]string{}
	values := map[string]any{}
	for _, k := range keys {
		tgt, err := r.readTarget(ctx, reads, inst.Namespace, scope, fmt.Sprintf("target import %q: targetMap[%q]", t.Name, k), t.TargetMap[k], im)
		if err != nil {
			return p, err
		}
		im.targets[blueprint.MapMember(t.Name, k)] = tgt
		p.Types["["+k+"]"] = tgt.Spec.Type
		names[k] = tgt.Name
		values[k] = targetValue(tgt)
	}
	im.groups[t.Name] = blueprint.TypeTargetMap
	im.imported.Maps[t.Name] = names
	im.values[t.Name] = values
	return p, nil
}

// readTarget reads the Target ref names in scope, within the bound on the
// imports' bytes; what names the import (and entry) in messages.
func (r *Reconciler) readTarget(ctx context.Context, reads importReads, ns, scope, what, ref string, im *imports) (*lsv1alpha1.Target, error) {
	name := ScopedName(scope, ref)
	tgt := &lsv1alpha1.Target{}
	if err := r.getImport(ctx, reads, client.ObjectKey{Namespace: ns, Name: name}, tgt); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, flow.Stalledf(ReasonImportNotFound, "%s: Target %s/%s does not exist%s", what, ns, name, scopeHint(scope, ref))
		}
		return nil, err
	}
	var size int
	if tgt.Spec.Config != nil {
		size = len(tgt.Spec.Config.RawMessage)
	}
	if err := r.countImportBytes(im, what, size); err != nil {
		return nil, err
	}
	return tgt, nil
}

// expandGroupRefs replaces, in the sub-installations' templates, each
// targetListRef and targetMapRef naming a targetList or targetMap import of
// this installation by the Targets of its context copies
// (blueprint.ListMember, MapMember), which the sub-installation reads like
// any target of its parent's context. A ref naming no such import is left
// for CheckSubinstallationImports to refuse.
func expandGroupRefs(templates []blueprint.InstallationTemplate, im *imports) {
	for i := range templates {
		// A copy: the static templates share their lists with the parsed
		// blueprint, which later jobs use again.
		targets := append([]lsv1alpha1.TargetImport(nil), templates[i].Imports.Targets...)
		templates[i].Imports.Targets = targets
		for j := range targets {
			t := &targets[j]
			if list, ok := im.imported.Lists[t.TargetListReference]; ok && t.TargetListReference != "" {
				t.Targets = make([]string, len(list))
				for k := range list {
					t.Targets[k] = blueprint.ListMember(t.TargetListReference, k)
				}
				t.TargetListReference = ""
			}
			if m, ok := im.imported.Maps[t.TargetMapReference]; ok && t.TargetMapReference != "" {
				t.TargetMap = make(map[string]string, len(m))
				for k := range m {
					t.TargetMap[k] = blueprint.MapMember(t.TargetMapReference, k)
				}
				t.TargetMapReference = ""
			}
		}
	}
}
