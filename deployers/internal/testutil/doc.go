// Package testutil holds helpers shared by the deployers' envtest tests.
package testutil
