package execution

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// ItemObjectName is the deterministic name of the DeployItem for item of
// execution exec: "<exec>-<item>". Deterministic names make creation
// idempotent, so a restarted controller never creates an item twice. Names
// that would exceed the 253-character limit are shortened with a hash.
func ItemObjectName(exec, item string) string {
	return shorten(exec+"-"+item, validation.DNS1123SubdomainMaxLength)
}

// ExportsObjectName is the name of the DataObject holding exec's exports.
func ExportsObjectName(exec string) string {
	return shorten(exec+"-exports", validation.DNS1123SubdomainMaxLength)
}

// ManagedByValue is the value of the managed-by label for exec: its name when
// that is a valid label value, otherwise a shortened form with a hash.
func ManagedByValue(exec string) string {
	if len(validation.IsValidLabelValue(exec)) == 0 {
		return exec
	}
	return strings.Trim(shorten(exec, validation.LabelValueMaxLength), ".-_")
}

func shorten(s string, maxLen int) string {
	if len(s) <= maxLen {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:10]
	return strings.TrimRight(s[:maxLen-11], ".-") + "-" + h
}

// itemName returns the name of an item inside its execution.
func itemName(di *lsv1alpha1.DeployItem) string {
	if n := di.Labels[lsv1alpha1.ExecutionItemNameLabel]; n != "" {
		return n
	}
	// Someone removed the label: the object name still identifies it (and it
	// can never clash with a valid item name, which has no '/').
	return "object/" + di.Name
}

// controllerName describes o's controller for messages: "Kind name (uid)",
// or "nothing".
func controllerName(o client.Object) string {
	ref := metav1.GetControllerOf(o)
	if ref == nil {
		return "nothing (no controller reference)"
	}
	return fmt.Sprintf("%s %s (%s, uid %s)", ref.Kind, ref.Name, ref.APIVersion, ref.UID)
}
