package observabilitytest

import (
	"context"

	"github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Events lists "<type>/<reason>" (e.g. "Warning/Failed") of the Events in
// namespace ns regarding the object named name, as c lists them
// (events.k8s.io/v1, the API Terrace's recorders write).
func Events(g gomega.Gomega, c client.Reader, ns, name string) []string {
	var out []string
	for _, e := range regarding(g, c, ns, name) {
		out = append(out, e.Type+"/"+e.Reason)
	}
	return out
}

// EventReasons lists the reasons of the Events in namespace ns regarding the
// object named name.
func EventReasons(g gomega.Gomega, c client.Reader, ns, name string) []string {
	var out []string
	for _, e := range regarding(g, c, ns, name) {
		out = append(out, e.Reason)
	}
	return out
}

// NamespaceEvents lists every Event in namespace ns as
// "<kind>/<name> <type> <reason>" of the object it regards (e.g.
// "Execution/root Warning Failed"): for a test whose objects of different
// kinds share names, as an installation and its execution do.
func NamespaceEvents(g gomega.Gomega, c client.Reader, ns string) []string {
	var list eventsv1.EventList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(ns))).To(gomega.Succeed())
	out := make([]string, 0, len(list.Items))
	for _, e := range list.Items {
		out = append(out, e.Regarding.Kind+"/"+e.Regarding.Name+" "+e.Type+" "+e.Reason)
	}
	return out
}

func regarding(g gomega.Gomega, c client.Reader, ns, name string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(ns))).To(gomega.Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}
