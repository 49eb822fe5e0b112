// Package e2e is the end-to-end suite: it runs every Terrace binary as its own
// process against one API server. The suite arrives with the local-environment
// issue; until then this module only reserves its place in the workspace.
package e2e
