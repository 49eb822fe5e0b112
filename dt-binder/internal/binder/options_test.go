package binder_test

import (
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/terrace-dev/terrace/dt-binder/internal/binder"
)

func TestOptionsFlags(t *testing.T) {
	var o binder.Options
	fs := pflag.NewFlagSet("dt-binder", pflag.ContinueOnError)
	o.BindFlags(fs)
	if o.UnableToTerminateTimeout != 2*time.Minute || o.BindRetryInterval != 500*time.Millisecond {
		t.Fatalf("defaults: got %+v", o)
	}
	if err := fs.Parse([]string{"--unable-to-terminate-timeout=5s", "--bind-retry-interval=1s"}); err != nil {
		t.Fatal(err)
	}
	if o.UnableToTerminateTimeout != 5*time.Second || o.BindRetryInterval != time.Second {
		t.Fatalf("parsed: got %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := binder.Options{UnableToTerminateTimeout: -1, BindRetryInterval: -1, MaxConcurrentReconciles: -1}
	if err := bad.Validate(); err == nil {
		t.Fatal("negative options must be refused")
	}
	if err := binder.AddToManager(nil, binder.Options{}); err == nil {
		t.Fatal("a nil manager must be refused")
	}
}
