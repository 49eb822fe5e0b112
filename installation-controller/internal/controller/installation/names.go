package installation

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/blueprint"
)

// Labels and annotations on the DataObjects and Targets this controller writes.
const (
	// ContextLabel names (as a label value) the installation whose context a
	// DataObject or Target belongs to: the parent of the installations that
	// exchange values through it.
	ContextLabel = "installation.terrace.dev/context"
	// KeyAnnotation holds the logical name of a context object (the dataRef or
	// target name its users write), which its object name may not show.
	KeyAnnotation = "installation.terrace.dev/key"
	// StartedJobAnnotation records, on a root installation, the job that a
	// reconcile annotation started. It is written in the same metadata patch
	// that consumes the reconcile annotation, right before the status write
	// that records the job's start, so a start whose status write never
	// happened (a crash, a conflict) is resumed by the next reconcile instead
	// of lost.
	StartedJobAnnotation = "installation.terrace.dev/started-job"
)

// Field indexes on Installations.
const (
	// ImportsIndex lists the context objects an installation imports
	// ("data/<object>", "target/<object>").
	ImportsIndex = "terrace.dev/imports"
	// ExportsIndex lists the context objects an installation exports.
	ExportsIndex = "terrace.dev/exports"
	// ParentIndex holds the name of the installation's parent (its
	// controller owner), so a parent finds its sub-installations without
	// scanning the namespace.
	ParentIndex = "terrace.dev/parent"
)

// parentName returns the name of the installation's parent, "" for roots.
// The controller owner reference decides, not the label: a label can be
// edited by hand, the owner reference is what the parent set.
func parentName(inst *lsv1alpha1.Installation) string {
	ref := metav1.GetControllerOf(inst)
	if ref == nil || ref.Kind != "Installation" || !strings.HasPrefix(ref.APIVersion, lsv1alpha1.GroupName+"/") {
		return ""
	}
	return ref.Name
}

func isRoot(inst *lsv1alpha1.Installation) bool { return parentName(inst) == "" }

// ScopedName is the name of the object holding value ref in the context of
// installation ctx. Root installations (ctx "") use names verbatim; the
// sub-installations of one parent share "<parent>.<ref>", so siblings
// exchange values without clashing with another parent's children.
func ScopedName(ctx, ref string) string {
	if ctx == "" {
		return ref
	}
	n := ctx + "." + ref
	if len(validation.IsDNS1123Subdomain(n)) == 0 {
		return n
	}
	return shorten("ctx-"+hash(n)[:16]+"-"+blueprint.SanitizeName(ref), validation.DNS1123SubdomainMaxLength)
}

// SubInstallationName is the deterministic object name of a sub-installation:
// creation is idempotent and a restarted controller never creates twice.
func SubInstallationName(parent, template string) string {
	return shorten(parent+"-"+blueprint.SanitizeName(template), validation.DNS1123SubdomainMaxLength)
}

// labelValue turns a name into a valid label value (hashing when needed).
func labelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	return strings.Trim(shorten(blueprint.SanitizeName(s), validation.LabelValueMaxLength), ".-_")
}

func shorten(s string, maxLen int) string {
	if len(s) <= maxLen {
		return s
	}
	return strings.TrimRight(s[:maxLen-11], ".-") + "-" + hash(s)[:10]
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func dataKey(name string) string   { return "data/" + name }
func targetKey(name string) string { return "target/" + name }

// importKeys are the index values of an installation's data and target imports.
func importKeys(inst *lsv1alpha1.Installation) []string {
	ctx := parentName(inst)
	var keys []string
	for _, d := range inst.Spec.Imports.Data {
		if d.DataRef != "" {
			keys = append(keys, dataKey(ScopedName(ctx, d.DataRef)))
		}
	}
	for _, t := range inst.Spec.Imports.Targets {
		for _, ref := range targetRefs(t) {
			keys = append(keys, targetKey(ScopedName(ctx, ref)))
		}
	}
	return keys
}

// exportKeys are the index values of an installation's exports.
func exportKeys(inst *lsv1alpha1.Installation) []string {
	ctx := parentName(inst)
	var keys []string
	for _, d := range inst.Spec.Exports.Data {
		keys = append(keys, dataKey(ScopedName(ctx, d.DataRef)))
	}
	for _, t := range inst.Spec.Exports.Targets {
		keys = append(keys, targetKey(ScopedName(ctx, t.Target)))
	}
	return keys
}

func indexImports(o client.Object) []string {
	inst, ok := o.(*lsv1alpha1.Installation)
	if !ok {
		return nil
	}
	return importKeys(inst)
}

func indexExports(o client.Object) []string {
	inst, ok := o.(*lsv1alpha1.Installation)
	if !ok {
		return nil
	}
	return exportKeys(inst)
}

func indexParent(o client.Object) []string {
	inst, ok := o.(*lsv1alpha1.Installation)
	if !ok {
		return nil
	}
	if p := parentName(inst); p != "" {
		return []string{p}
	}
	return nil
}

// targetRefs are the Targets a target import names: one, or those of a
// targetList or targetMap.
func targetRefs(t lsv1alpha1.TargetImport) []string {
	refs := append([]string(nil), t.Targets...)
	if t.Target != "" {
		refs = append(refs, t.Target)
	}
	for _, ref := range t.TargetMap {
		refs = append(refs, ref)
	}
	return refs
}
