package tracingtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terrace-dev/terrace/kit/tracing"
)

// AnnotationWatch records, from watches of a namespace, every version of an
// object that carried the trace-context annotation
// (tracing.TraceContextAnnotation): the check that a controller with tracing
// off never writes it.
type AnnotationWatch struct {
	mu        sync.Mutex
	seen      int
	deleted   []string
	annotated []string
}

// WatchAnnotations watches the objects of each list's kind in namespace ns
// through c until tb ends. The watches are established when it returns, so
// every later write is seen.
func WatchAnnotations(tb testing.TB, c client.WithWatch, ns string, lists ...client.ObjectList) *AnnotationWatch {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	aw := &AnnotationWatch{}
	var (
		wg       sync.WaitGroup
		watchers []watch.Interface
	)
	tb.Cleanup(func() {
		for _, w := range watchers {
			w.Stop()
		}
		cancel()
		wg.Wait()
	})
	for _, list := range lists {
		w, err := c.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			tb.Fatalf("watching %T in %s: %v", list, ns, err)
		}
		watchers = append(watchers, w)
		wg.Go(func() {
			for ev := range w.ResultChan() {
				obj, ok := ev.Object.(client.Object)
				if !ok || ev.Type == watch.Error || ev.Type == watch.Bookmark {
					continue
				}
				aw.mu.Lock()
				aw.seen++
				if ev.Type == watch.Deleted {
					aw.deleted = append(aw.deleted, obj.GetName())
				}
				if _, has := obj.GetAnnotations()[tracing.TraceContextAnnotation]; has {
					aw.annotated = append(aw.annotated, fmt.Sprintf("%s %T %s rv %s", ev.Type, obj, obj.GetName(), obj.GetResourceVersion()))
				}
				aw.mu.Unlock()
			}
		})
	}
	return aw
}

// Seen is the number of object versions (added, modified, deleted) the
// watches saw.
func (aw *AnnotationWatch) Seen() int {
	aw.mu.Lock()
	defer aw.mu.Unlock()
	return aw.seen
}

// Deleted lists the names of the objects the watches saw deleted.
func (aw *AnnotationWatch) Deleted() []string {
	aw.mu.Lock()
	defer aw.mu.Unlock()
	return slices.Clone(aw.deleted)
}

// Annotated lists the versions that carried the annotation, as
// "<event type> <Go type> <name> rv <resourceVersion>".
func (aw *AnnotationWatch) Annotated() []string {
	aw.mu.Lock()
	defer aw.mu.Unlock()
	return slices.Clone(aw.annotated)
}
