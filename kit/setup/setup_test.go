package setup_test

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terrace-dev/terrace/kit/setup"
)

type recorder struct{}

func TestCheck(t *testing.T) {
	var nilClient client.Client
	var nilPointer *recorder
	cases := []struct {
		name   string
		inputs []setup.Input
		want   []string // every line of the error; none: no error
	}{
		{name: "all set", inputs: []setup.Input{
			setup.Required("Recorder", &recorder{}), setup.Required("FieldManager", "x"), setup.Required("Now", func() {}),
		}},
		{name: "nothing to check"},
		{name: "nil interface", inputs: []setup.Input{setup.Required("Client", nilClient)},
			want: []string{"thing: Client is nil"}},
		{name: "nil pointer held in an interface", inputs: []setup.Input{setup.Required("Recorder", nilPointer)},
			want: []string{"thing: Recorder is nil"}},
		{name: "empty string", inputs: []setup.Input{setup.Required("FieldManager", "")},
			want: []string{"thing: FieldManager is empty"}},
		{name: "every missing input is named, in order", inputs: []setup.Input{
			setup.Required("Client", nilClient), setup.Required("Recorder", &recorder{}), setup.Required("FieldManager", ""),
		}, want: []string{"thing: Client is nil", "thing: FieldManager is empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := setup.Check("thing", tc.inputs...)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %q, got no error", tc.want)
			}
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("want %q, got %q", tc.want, got)
			}
		})
	}
}
