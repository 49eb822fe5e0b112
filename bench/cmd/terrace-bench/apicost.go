package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// wAPICost is the workload that prices single requests (see apiCost).
const wAPICost = "apicost"

// apiCostResult is kube-apiserver's and etcd's CPU time per request of one kind.
type apiCostResult struct {
	Request           string  `json:"request"`
	N                 int     `json:"n"`
	WallSeconds       float64 `json:"wallSeconds"`
	APIServerMsPerReq float64 `json:"apiserverMsPerRequest"`
	EtcdMsPerReq      float64 `json:"etcdMsPerRequest"`
}

// apiCost prices the kinds of request Terrace sends, on this machine: n
// requests of one kind at a time, from the bench's concurrent clients, and
// the CPU time kube-apiserver and etcd used, divided by n. DataObjects stand
// for Terrace's custom resources (a small CRD the installation controller and
// kube-controller-manager watch, so each write is fanned out as usual); a
// ConfigMap and an Event stand for built-in types. The product of these
// prices and the requests per root object is the control plane's share of a
// workload's CPU, which on one shared machine bounds its throughput.
func (b *bench) apiCost(ctx context.Context, n, creators int) ([]apiCostResult, error) {
	ns := b.nextNamespace(wAPICost)
	if err := b.createNamespace(ctx, ns); err != nil {
		return nil, err
	}
	var out []apiCostResult
	// The objects go when the prices are taken, so the workloads after this
	// one meet the empty control plane they would have met without it.
	defer func() {
		if err := b.removeNamespace(ctx, ns); err != nil {
			fmt.Fprintf(os.Stderr, "==> %s: %v\n", wAPICost, err)
		}
	}()
	for _, k := range b.costKinds(ctx, ns) {
		r, err := b.price(ctx, k, n, creators)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// costKind is one kind of request apiCost prices; do sends the i-th.
type costKind struct {
	request string
	do      func(i int) error
}

// costKinds are the kinds of request apiCost prices, in order: the gets,
// patches and applies find the objects the creates before them made.
func (b *bench) costKinds(ctx context.Context, ns string) []costKind {
	return []costKind{
		{"create (custom resource)", func(i int) error { return b.c.Create(ctx, costDataObject(ns, i)) }},
		{"get (custom resource)", func(i int) error {
			return b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: costObjectName(i)}, &lsv1alpha1.DataObject{})
		}},
		{"merge patch (custom resource)", func(i int) error {
			return b.c.Patch(ctx, costDataObject(ns, i), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"bench":"1"}}}`)))
		}},
		{"server-side apply (custom resource)", func(i int) error { return b.applyDataObject(ctx, ns, i, "1") }},
		{"create (ConfigMap)", func(i int) error {
			return b.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: costObjectName(i)}, Data: map[string]string{"a": "b"}})
		}},
		{"create (Event)", func(i int) error {
			return b.c.Create(ctx, &eventsv1.Event{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bench-"}, EventTime: metav1.NowMicro(),
				Type: corev1.EventTypeNormal, Reason: "Succeeded", Action: "Reconcile", Note: "job succeeded",
				ReportingController: "terrace-bench", ReportingInstance: "terrace-bench",
				Regarding: corev1.ObjectReference{APIVersion: lsv1alpha1.SchemeGroupVersion.String(), Kind: "DataObject", Namespace: ns, Name: costObjectName(i)},
			})
		}},
	}
}

func costObjectName(i int) string { return fmt.Sprintf("d-%04d", i) }

func costDataObject(ns string, i int) *lsv1alpha1.DataObject {
	return &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: costObjectName(i)}, Data: lsv1alpha1.NewAnyJSON([]byte(`{"greeting":"hi"}`))}
}

// applyDataObject server-side applies the i-th DataObject with label bench=v.
func (b *bench) applyDataObject(ctx context.Context, ns string, i int, v string) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": lsv1alpha1.SchemeGroupVersion.String(), "kind": "DataObject",
		"metadata": map[string]any{"namespace": ns, "name": costObjectName(i), "labels": map[string]any{"bench": v}},
	}}
	return b.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("terrace-bench"), client.ForceOwnership)
}

// price sends n requests of kind k, once the Terrace processes are quiet,
// and divides kube-apiserver's and etcd's CPU time by n.
func (b *bench) price(ctx context.Context, k costKind, n, creators int) (apiCostResult, error) {
	if err := b.count.WaitQuiet(ctx, quietWindow, quietTimeout); err != nil {
		return apiCostResult{}, err
	}
	before, err := b.controlPlaneCPU()
	if err != nil {
		return apiCostResult{}, err
	}
	start := time.Now()
	if err := inParallel(n, creators, k.do); err != nil {
		return apiCostResult{}, fmt.Errorf("%s: %w", k.request, err)
	}
	wall := time.Since(start)
	after, err := b.controlPlaneCPU()
	if err != nil {
		return apiCostResult{}, err
	}
	return apiCostResult{
		Request: k.request, N: n, WallSeconds: wall.Seconds(),
		APIServerMsPerReq: (after["kube-apiserver"] - before["kube-apiserver"]) * 1000 / float64(n),
		EtcdMsPerReq:      (after["etcd"] - before["etcd"]) * 1000 / float64(n),
	}, nil
}

// removeNamespace deletes ns and waits (bounded) until it is gone.
func (b *bench) removeNamespace(ctx context.Context, ns string) error {
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := b.c.Delete(ctx, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := b.c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("namespace %s not gone: %w", ns, err)
	}
	return nil
}

// controlPlaneCPU reads kube-apiserver's and etcd's CPU seconds.
func (b *bench) controlPlaneCPU() (map[string]float64, error) {
	cpu := map[string]float64{}
	for _, p := range b.procs {
		if p.Name != "kube-apiserver" && p.Name != "etcd" {
			continue
		}
		s, err := readProc(p.PID)
		if err != nil {
			return nil, err
		}
		cpu[p.Name] = float64(s.cpuTicks) / clockTicks
	}
	return cpu, nil
}

func writeAPICost(w io.Writer, rs []apiCostResult) error {
	p := &printer{w: w}
	p.printf("\n=== %s — CPU per request of kube-apiserver and etcd, %d requests of each kind\n", wAPICost, firstN(rs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	tp := &printer{w: tw}
	tp.printf("request\tkube-apiserver ms\tetcd ms\twall s\n")
	for _, r := range rs {
		tp.printf("%s\t%.2f\t%.2f\t%.2f\n", r.Request, r.APIServerMsPerReq, r.EtcdMsPerReq, r.WallSeconds)
	}
	tp.flush(tw)
	if p.err != nil {
		return p.err
	}
	return tp.err
}

func firstN(rs []apiCostResult) int {
	if len(rs) == 0 {
		return 0
	}
	return rs[0].N
}
