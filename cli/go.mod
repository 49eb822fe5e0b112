module github.com/terrace-dev/terrace/cli

go 1.26.0

replace (
	github.com/terrace-dev/terrace/apis => ../apis
	github.com/terrace-dev/terrace/kit => ../kit
)

require (
	github.com/opencontainers/image-spec v1.1.1
	github.com/spf13/cobra v1.10.2
	github.com/terrace-dev/terrace/kit v0.0.0-00010101000000-000000000000
	go.yaml.in/yaml/v3 v3.0.5
	oras.land/oras-go/v2 v2.6.2
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/fxamacker/cbor/v2 v2.9.1 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/sync v0.24.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	k8s.io/apimachinery v0.37.0 // indirect
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730 // indirect
)
