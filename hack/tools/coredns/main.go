// Command coredns is CoreDNS with only the plugins the local node's cluster
// DNS uses: the names of Services and Pods under cluster.local, answered from
// the local control plane. Nothing is forwarded: the machine has no upstream
// resolver that pods may reach.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives is the order the plugins run in, as in CoreDNS's own plugin.cfg.
var directives = []string{"bind", "ready", "health", "errors", "log", "cache", "kubernetes"}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
