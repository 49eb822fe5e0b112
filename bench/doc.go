// Package bench is the cross-binary benchmark of Terrace (make bench): the
// command cmd/terrace-bench starts a fresh local environment and runs named
// workloads through every process; package apirequests attributes the API
// server's requests to the processes that sent them. See
// docs/performance.md.
package bench
