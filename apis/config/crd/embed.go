// Package crd embeds the generated CustomResourceDefinitions, one file per
// CRD, so tests and installers get them without file paths.
package crd

import "embed"

// Bases holds bases/*.yaml.
//
//go:embed bases/*.yaml
var Bases embed.FS
