// Package cmdutil holds the flags the deployer binaries share beside kit/app's.
package cmdutil
