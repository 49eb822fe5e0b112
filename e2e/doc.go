// Package e2e is the end-to-end suite: it runs every Terrace binary as its own
// process against one API server (see README.md).
package e2e
