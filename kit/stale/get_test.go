package stale

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// reader answers every Get with err, or fills the ConfigMap's data with
// value; it counts its calls.
type reader struct {
	err   error
	value string
	calls int
}

func (r *reader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.calls++
	if r.err != nil {
		return r.err
	}
	obj.(*corev1.ConfigMap).Data = map[string]string{"v": r.value}
	return nil
}

func (r *reader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not used")
}

// Get asks the API server only when the cache does not hold the object, and
// passes every other outcome of the cache through.
func TestGet(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "x")
	broken := errors.New("cache broken")
	cases := []struct {
		name          string
		cache, live   *reader
		want          string
		wantErr       error
		wantNotFound  bool
		wantLiveCalls int
	}{
		{name: "cached", cache: &reader{value: "cached"}, live: &reader{value: "live"}, want: "cached"},
		{name: "not cached yet", cache: &reader{err: notFound}, live: &reader{value: "live"}, want: "live", wantLiveCalls: 1},
		{name: "gone", cache: &reader{err: notFound}, live: &reader{err: notFound}, wantNotFound: true, wantLiveCalls: 1},
		{name: "cache error", cache: &reader{err: broken}, live: &reader{value: "live"}, wantErr: broken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{}
			err := Get(context.Background(), tc.cache, tc.live, client.ObjectKey{Namespace: "ns", Name: "x"}, cm)
			switch {
			case tc.wantNotFound:
				if !apierrors.IsNotFound(err) {
					t.Fatalf("err = %v, want NotFound", err)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			case cm.Data["v"] != tc.want:
				t.Fatalf("read %q, want %q", cm.Data["v"], tc.want)
			}
			if tc.live.calls != tc.wantLiveCalls {
				t.Errorf("API server read %d times, want %d", tc.live.calls, tc.wantLiveCalls)
			}
		})
	}
}
