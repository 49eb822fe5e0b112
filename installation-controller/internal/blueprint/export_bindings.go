package blueprint

import "github.com/terrace-dev/terrace/installation-controller/internal/tmpl"

// ExportBindings are what an installation's export executions read besides
// the standard binding (.imports and the rest).
type ExportBindings struct {
	// DeployItems are the exports of the execution's deploy items by item
	// name; an item that exported nothing has no entry.
	DeployItems map[string]any
	// ItemNames are the names of all the execution's deploy items.
	ItemNames []string
	// DataObjects and Targets are the installation's context by key: what its
	// sub-installations exported, and the copies of its own imports.
	DataObjects, Targets map[string]any
}

// ExportValues adds the bindings to standard as Landscaper documents them:
// .deployitems, .dataobjects and .targets, and the same under .values, which
// older blueprints read. It returns the collections whose entries a failed
// render's error names.
func ExportValues(standard map[string]any, b ExportBindings) (map[string]any, []tmpl.Collection) {
	values := make(map[string]any, len(standard)+4)
	for k, v := range standard {
		values[k] = v
	}
	values["deployitems"] = b.DeployItems
	values["dataobjects"] = b.DataObjects
	values["targets"] = b.Targets
	values["values"] = map[string]any{"deployitems": b.DeployItems, "dataobjects": b.DataObjects, "targets": b.Targets}
	itemNames := b.ItemNames
	if itemNames == nil {
		itemNames = []string{}
	}
	var collections []tmpl.Collection
	for _, prefix := range []string{"", "values."} {
		collections = append(collections,
			tmpl.Collection{Path: prefix + "deployitems", Noun: "deploy item", Owner: "the execution", Names: itemNames, NoValue: "exported nothing"},
			tmpl.Collection{Path: prefix + "dataobjects", Noun: "data object", Owner: "the installation's context"},
			tmpl.Collection{Path: prefix + "targets", Noun: "target", Owner: "the installation's context"})
	}
	return values, collections
}
