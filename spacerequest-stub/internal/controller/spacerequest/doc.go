// Package spacerequest is the spacerequest-stub's one reconciler: it serves a
// SpaceRequest with a namespace (restricted Pod Security, a ResourceQuota and
// a LimitRange sized by its namespace limits annotation), a ServiceAccount holding the edit ClusterRole
// in that namespace only, and a kubeconfig Secret whose token comes from the
// TokenRequest API; it reports the result in the SpaceRequest's Ready
// condition and tears everything down again when the SpaceRequest is deleted.
package spacerequest
