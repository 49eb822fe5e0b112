package schema

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The references a schema may make besides "#..." fragments of itself.
const (
	// LocalScheme names one of the blueprint's localTypes: local://<name>.
	LocalScheme = "local://"
	// BlueprintScheme names a JSON file of the blueprint's filesystem:
	// blueprint://<path>.
	BlueprintScheme = "blueprint://"
	// ComponentScheme names a component descriptor's resource, which
	// Terrace does not resolve yet.
	ComponentScheme = "cd://"
)

// RefError is a reference a schema may not make, or that names nothing in
// the blueprint. It names the reference, never what it points to.
type RefError struct {
	Ref    string
	Reason string
}

func (e *RefError) Error() string {
	return fmt.Sprintf("reference %q: %s", e.Ref, e.Reason)
}

// errOutside is why a reference of any other scheme is refused.
const errOutside = "a schema may only refer to parts of its blueprint: \"#...\" within the schema, " +
	LocalScheme + "<name> for one of its localTypes, or " + BlueprintScheme + "<path> for a JSON file of its filesystem"

// loader resolves the references of one Document's schemas. It is the
// compiler's only loader, so nothing else is ever opened: the library's
// metaschemas come from its embedded copies before a loader is asked.
type loader struct {
	doc Document
	// fileBytes is the size of the files loaded.
	fileBytes int64
}

// Load implements jsonschema.URLLoader. The compiler loads each URL once;
// a local type and a file each have one spelling (their name, their clean
// path), so that a schema cannot make the compiler copy a large one under
// many URLs.
func (l *loader) Load(u string) (any, error) {
	switch {
	case strings.HasPrefix(u, LocalScheme):
		return l.localType(u, strings.TrimPrefix(u, LocalScheme))
	case strings.HasPrefix(u, BlueprintScheme):
		return l.file(u, strings.TrimPrefix(u, BlueprintScheme))
	case strings.HasPrefix(u, ComponentScheme):
		return nil, &RefError{Ref: u, Reason: "references to component descriptors (" + ComponentScheme + ") are not supported yet; copy the schema into the blueprint's localTypes and refer to it as " + LocalScheme + "<name>"}
	case strings.HasPrefix(u, "field:"):
		return nil, &RefError{Ref: u, Reason: "a relative reference names no part of the blueprint; " + errOutside}
	default:
		return nil, &RefError{Ref: u, Reason: errOutside}
	}
}

func (l *loader) localType(u, name string) (any, error) {
	t, ok := l.doc.LocalTypes[name]
	if !ok {
		names := make([]string, 0, len(l.doc.LocalTypes))
		for n := range l.doc.LocalTypes {
			names = append(names, n)
		}
		sort.Strings(names)
		have := "it has none"
		if len(names) > 0 {
			have = "it has " + strings.Join(names, ", ")
		}
		return nil, &RefError{Ref: u, Reason: fmt.Sprintf("the blueprint has no local type %q in localTypes (%s)", name, have)}
	}
	doc, err := roundTrip(t)
	if err != nil {
		return nil, &RefError{Ref: u, Reason: fmt.Sprintf("local type %q is not JSON: %v", name, err)}
	}
	return doc, nil
}

func (l *loader) file(u, p string) (any, error) {
	clean := strings.TrimPrefix(path.Clean("/"+p), "/")
	if clean != p {
		return nil, &RefError{Ref: u, Reason: fmt.Sprintf("write the path as %s%s", BlueprintScheme, clean)}
	}
	content, ok := l.doc.Files[clean]
	if !ok {
		return nil, &RefError{Ref: u, Reason: fmt.Sprintf("the blueprint's filesystem has no file %q", clean)}
	}
	l.fileBytes += int64(len(content))
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
	if err != nil {
		return nil, &RefError{Ref: u, Reason: fmt.Sprintf("file %q of the blueprint is not JSON: %v", clean, err)}
	}
	return doc, nil
}
