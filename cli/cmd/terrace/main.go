// Command terrace builds and pushes OCM component versions and Helm charts to
// OCI registries, and reads component versions back.
package main

import (
	"os"

	"github.com/terrace-dev/terrace/cli/internal/command"
)

func main() {
	os.Exit(command.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
