package schema

import (
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// drafts are the JSON schema drafts a blueprint's jsonSchemaVersion may
// name, by the URL of their metaschema (without scheme, which may be http
// or https, and without a trailing "#").
var drafts = map[string]*jsonschema.Draft{
	"json-schema.org/draft-04/schema":      jsonschema.Draft4,
	"json-schema.org/draft-06/schema":      jsonschema.Draft6,
	"json-schema.org/draft-07/schema":      jsonschema.Draft7,
	"json-schema.org/draft/2019-09/schema": jsonschema.Draft2019,
	"json-schema.org/draft/2020-12/schema": jsonschema.Draft2020,
}

// draftOf returns the draft that url names, nil for none.
func draftOf(url string) *jsonschema.Draft {
	u := strings.TrimSuffix(strings.TrimSpace(url), "#")
	if rest, ok := strings.CutPrefix(u, "https://"); ok {
		u = rest
	} else {
		u = strings.TrimPrefix(u, "http://")
	}
	return drafts[u]
}

// CheckDraft says whether url names a draft the validator knows.
func CheckDraft(url string) error {
	if draftOf(url) == nil {
		return fmt.Errorf("%q names no JSON schema draft this controller knows: use one of %s", url, KnownDrafts())
	}
	return nil
}

// KnownDrafts lists the drafts' URLs for error messages.
func KnownDrafts() string {
	return "https://json-schema.org/draft-04/schema, https://json-schema.org/draft-06/schema, " +
		"https://json-schema.org/draft-07/schema, https://json-schema.org/draft/2019-09/schema, " +
		"https://json-schema.org/draft/2020-12/schema"
}
