package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// labelHashLength is how many hex digits of the name's SHA-256 end a
// shortened label value.
const labelHashLength = 10

// LabelValue returns name as a label value. Object names may have up to 253
// characters, label values 63: a longer name becomes its first characters, a
// dash and a hash of the whole name, so different names stay different and
// the same name always gives the same value (for selectors).
func LabelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	prefix := name[:min(len(name), validation.LabelValueMaxLength-labelHashLength-1)]
	// A label value must start and end with an alphanumeric character.
	prefix = strings.TrimRight(prefix, "-_.")
	return prefix + "-" + hex.EncodeToString(sum[:])[:labelHashLength]
}

// ClaimOf returns the name of the claim a SpaceRequest was created for: the
// ClaimLabel annotation, or (objects written before it) the label.
func ClaimOf(o metav1.Object) string { return fullName(o, ClaimLabel) }

// ClassOf returns the name of the class of the claim a SpaceRequest was
// created for, as ClaimOf does.
func ClassOf(o metav1.Object) string { return fullName(o, ClassLabel) }

func fullName(o metav1.Object, key string) string {
	if v := o.GetAnnotations()[key]; v != "" {
		return v
	}
	return o.GetLabels()[key]
}
