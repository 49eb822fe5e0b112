package components

import (
	"fmt"
	"strings"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/ocm"
)

// versionRef is a component version and the repository it is read from.
type versionRef struct {
	rc      *lsv1alpha1.RepositoryContext
	name    string
	version string
}

func (v versionRef) String() string {
	return fmt.Sprintf("%s:%s in %s", v.name, v.version, describe(v.rc))
}

// overwrite applies the overwrites to ref as Landscaper does: in order, an
// overwrite whose source matches replaces the fields its substitution sets,
// unless an earlier one already replaced any of them; an overwrite applies
// whole or not at all. An applied change is recorded in cv.Overwritten.
func (cv *ComponentVersion) overwrite(overwrites []lsv1alpha1.ComponentVersionOverwrite, ref versionRef) versionRef {
	out := ref
	var replacedRC, replacedName, replacedVersion bool
	for _, ow := range overwrites {
		src, sub := ow.Source, ow.Substitution
		if !matches(src, ref) {
			continue
		}
		setsRC, setsName, setsVersion := sub.RepositoryContext != nil, sub.ComponentName != "", sub.Version != ""
		if (setsRC && replacedRC) || (setsName && replacedName) || (setsVersion && replacedVersion) {
			continue
		}
		if setsRC {
			out.rc, replacedRC = sub.RepositoryContext, true
		}
		if setsName {
			out.name, replacedName = sub.ComponentName, true
		}
		if setsVersion {
			out.version, replacedVersion = sub.Version, true
		}
	}
	if out != ref {
		cv.Overwritten = append(cv.Overwritten, ref.String()+" -> "+out.String())
	}
	return out
}

// matches tells whether every field src sets equals ref's.
func matches(src lsv1alpha1.ComponentVersionOverwriteReference, ref versionRef) bool {
	if src.ComponentName != "" && src.ComponentName != ref.name {
		return false
	}
	if src.Version != "" && src.Version != ref.version {
		return false
	}
	return src.RepositoryContext == nil || sameRepository(src.RepositoryContext, ref.rc)
}

// sameRepository compares repository contexts as locations: the OCI type
// in any of its spellings, and the base URL without scheme or slashes.
func sameRepository(a, b *lsv1alpha1.RepositoryContext) bool {
	if a == nil || b == nil {
		return a == b
	}
	if ocm.IsOCIRepositoryType(a.Type) != ocm.IsOCIRepositoryType(b.Type) {
		return false
	}
	if !ocm.IsOCIRepositoryType(a.Type) && !strings.EqualFold(a.Type, b.Type) {
		return false
	}
	baseA, _, errA := ocm.ParseBaseURL(a.BaseURL, a.SubPath)
	baseB, _, errB := ocm.ParseBaseURL(b.BaseURL, b.SubPath)
	return errA == nil && errB == nil && baseA == baseB
}
