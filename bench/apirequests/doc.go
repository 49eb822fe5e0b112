// Package apirequests counts the requests kube-apiserver serves, attributed to
// the process that sent them, from kube-apiserver's own /metrics.
//
// kube-apiserver's apiserver_request_total has labels for verb and resource
// but none for the user, so on its own it cannot tell a controller's requests
// from a test's, kube-controller-manager's or kube-apiserver's own. API
// Priority and Fairness can: every request is classified by the first
// FlowSchema (in matchingPrecedence order) whose rules match its user, verb
// and resource, and kube-apiserver counts it, when it starts executing it
// (watches included), in apiserver_flowcontrol_dispatched_requests_total
// {flow_schema=...} (or in ..._rejected_requests_total when it is refused).
//
// Install creates, for each Process (a ServiceAccount), one FlowSchema per
// verb and resource the process is granted (its ClusterRole's rules) and one
// catch-all for anything else, all ahead of the built-in FlowSchemas and all
// sending the requests to the priority level the built-in "service-accounts"
// FlowSchema would (workload-low, fair queuing by user). So the requests are
// handled as before; only the name they are counted under changes, and the
// delta of those counters between two Scrapes is exactly what each process
// sent, by verb and resource. (One difference remains: fair queuing now sees
// one flow per FlowSchema instead of one per user; it only matters when the
// priority level is saturated and requests queue.) Server-side apply counts as
// patch (its RBAC verb).
//
// ClientCounter counts a client's own requests on the client side, so that a
// benchmark or test can subtract them from the apiserver_request_total delta.
package apirequests
