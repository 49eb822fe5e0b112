package components

import (
	"archive/tar"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/terrace-dev/terrace/kit/ocm"
)

func TestBlueprintFromLocalBlobOfEveryMediaType(t *testing.T) {
	e := newEnv(t)
	r := e.resolver(t, Options{})
	for i, mediaType := range BlueprintMediaTypes {
		for _, gz := range []bool{false, true} {
			marker := mediaType
			version := fmt.Sprintf("1.0.%d", i)
			if gz {
				version += "-gz"
			}
			e.push(t, component{name: "acme.org/bp", version: version, blobs: []blobResource{{"blueprint", mediaType, blueprintArchive(t, gz, marker)}}})
			cv, err := r.Resolve(context.Background(), e.ref("acme.org/bp", version))
			if err != nil {
				t.Fatal(err)
			}
			bp, err := r.Blueprint(context.Background(), cv.Root, ResourceRef{Name: "blueprint"})
			if err != nil {
				t.Fatalf("%s (gzip %v): %v", mediaType, gz, err)
			}
			if !strings.Contains(bp.Files["blueprint.yaml"], marker) || bp.Files["data/template.yaml"] != "deployItems: []\n" || len(bp.Files) != 2 {
				t.Errorf("%s (gzip %v): files %v", mediaType, gz, bp.Files)
			}
		}
	}
}

func TestBlueprintFromOCIArtifact(t *testing.T) {
	e := newEnv(t)
	ref := e.pushArtifact(t, "blueprints/echo", "1.0.0", blueprintTarGzip, blueprintArchive(t, true, "from an artifact"))
	e.push(t, component{name: "acme.org/art", version: "1.0.0", artifacts: map[string]string{"blueprint": ref}})
	r := e.resolver(t, Options{})
	cv, err := r.Resolve(context.Background(), e.ref("acme.org/art", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	bp, err := r.Blueprint(context.Background(), cv.Root, ResourceRef{Name: "blueprint"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(bp.Files["blueprint.yaml"], "from an artifact") || bp.Component != "acme.org/art:1.0.0" || bp.Resource != "blueprint" {
		t.Errorf("blueprint %+v", bp)
	}
}

func TestBlueprintBadContentIsRefusedWithTheReason(t *testing.T) {
	big := strings.Repeat("x", 4096)
	cases := []struct {
		name      string
		mediaType string
		data      func(t *testing.T) []byte
		opts      Options
		want      []string
	}{
		{"unsupported media type", "application/json", func(t *testing.T) []byte { return []byte("{}") }, Options{},
			[]string{`media type "application/json" is not a blueprint`}},
		{"not a tar", "application/x-tar", func(t *testing.T) []byte {
			return []byte("plain text, no tar at all, 512 bytes are needed for a header")
		}, Options{},
			[]string{"not a tar"}},
		{"path traversal", "application/x-tar", func(t *testing.T) []byte {
			return tarOf(t, false, entry{name: "blueprint.yaml", content: "a"}, entry{name: "data/../../etc/x", content: "b"})
		}, Options{}, []string{`"data/../../etc/x" leaves the blueprint`}},
		{"absolute path", "application/x-tar", func(t *testing.T) []byte {
			return tarOf(t, false, entry{name: "/etc/x", content: "b"})
		}, Options{}, []string{`"/etc/x" is an absolute path`}},
		{"symlink", "application/x-tar", func(t *testing.T) []byte {
			return tarOf(t, false, entry{name: "blueprint.yaml", content: "a"}, entry{name: "link", typeflag: tar.TypeSymlink})
		}, Options{}, []string{`"link" is a link`}},
		{"no blueprint.yaml", "application/tar+gzip", func(t *testing.T) []byte {
			return tarOf(t, true, entry{name: "sub/blueprint.yaml", content: "a"})
		}, Options{}, []string{"no blueprint.yaml at its root"}},
		{"too many files", "application/x-tar", func(t *testing.T) []byte {
			return tarOf(t, false, entry{name: "blueprint.yaml", content: "a"}, entry{name: "b", content: "b"}, entry{name: "c", content: "c"})
		}, Options{MaxBlueprintFiles: 2}, []string{"more than 2 files", "--max-blueprint-files"}},
		{"too many bytes", "application/x-tar", func(t *testing.T) []byte {
			return tarOf(t, false, entry{name: "blueprint.yaml", content: big})
		}, Options{MaxBlueprintBytes: 1024}, []string{"larger than 1Ki", "--max-blueprint-bytes"}},
		{"expanding gzip", "application/tar+gzip", func(t *testing.T) []byte {
			return tarOf(t, true, entry{name: "blueprint.yaml", content: strings.Repeat("y", 1<<20)})
		}, Options{MaxBlueprintBytes: 1024}, []string{"--max-blueprint-bytes"}},
	}
	e := newEnv(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			version := fmt.Sprintf("0.0.%d", i)
			e.push(t, component{name: "acme.org/bad", version: version, blobs: []blobResource{{"blueprint", tc.mediaType, tc.data(t)}}})
			r := e.resolver(t, tc.opts)
			cv, err := r.Resolve(context.Background(), e.ref("acme.org/bad", version))
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Blueprint(context.Background(), cv.Root, ResourceRef{Name: "blueprint"})
			wantErr(t, err, append([]string{`blueprint resource "blueprint" of component acme.org/bad:` + version}, tc.want...)...)
		})
	}
}

func TestBlueprintOfAMissingResourceOrBlob(t *testing.T) {
	e := newEnv(t)
	e.push(t, component{name: "acme.org/app", version: "1.0.0", artifacts: map[string]string{"gone": e.host + "/nothing/here:1.0"}})
	r := e.resolver(t, Options{})
	cv, err := r.Resolve(context.Background(), e.ref("acme.org/app", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Blueprint(context.Background(), cv.Root, ResourceRef{Name: "blueprint"})
	wantErr(t, err, `resource "blueprint" of component acme.org/app:1.0.0 not found`)
	_, err = r.Blueprint(context.Background(), cv.Root, ResourceRef{Name: "gone"})
	wantErr(t, err, `blueprint resource "gone" of component acme.org/app:1.0.0`, "nothing/here:1.0")
}

func TestBlueprintSelectsByExtraIdentity(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := blueprintArchive(t, true, "linux"), blueprintArchive(t, true, "windows")
	cd := &ocm.ComponentDescriptor{Meta: ocm.Meta{SchemaVersion: ocm.SchemaVersionV2}, Component: ocm.Component{Name: "acme.org/multi", Version: "1.0.0", Provider: ocm.Provider{Name: "acme"}}}
	for _, v := range []struct {
		os   string
		data []byte
	}{{"linux", a}, {"windows", b}} {
		cd.Component.Resources = append(cd.Component.Resources, ocm.Resource{
			ElementMeta: ocm.ElementMeta{Name: "blueprint", ExtraIdentity: map[string]string{"os": v.os}}, Type: "blueprint", Relation: ocm.RelationLocal,
			Access: ocm.NewLocalBlobAccess(ocm.LocalBlobAccess{LocalReference: ocmDigest(v.data), MediaType: blueprintTarGzip}),
		})
	}
	if _, err := ocm.Push(ctx, e.repo, cd, []ocm.LocalBlob{ocm.BytesBlob(blueprintTarGzip, a), ocm.BytesBlob(blueprintTarGzip, b)}); err != nil {
		t.Fatal(err)
	}
	r := e.resolver(t, Options{})
	cv, err := r.Resolve(ctx, e.ref("acme.org/multi", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	bp, err := r.Blueprint(ctx, cv.Root, ResourceRef{Name: "blueprint", ExtraIdentity: map[string]string{"os": "windows"}})
	if err != nil || !strings.Contains(bp.Files["blueprint.yaml"], "windows") {
		t.Fatalf("blueprint %v, %v", bp, err)
	}
	_, err = r.Blueprint(ctx, cv.Root, ResourceRef{Name: "blueprint"})
	wantErr(t, err, `more than one resource named "blueprint"`, "extraIdentity")
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{"./a/b": "a/b", "a//b/": "a/b", "./": "", "a\\b": "a/b"} {
		got, err := cleanPath(in)
		if err != nil || got != want {
			t.Errorf("cleanPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := cleanPath("a\\..\\..\\x"); err == nil {
		t.Error("a backslash path climbing out was accepted")
	}
}

func ocmDigest(data []byte) string { return digest.FromBytes(data).String() }

func TestBlueprintOverTheBlobLimitNamesTheFlag(t *testing.T) {
	e := newEnv(t)
	e.push(t, component{name: "acme.org/big", version: "1.0.0", blobs: []blobResource{{"blueprint", blueprintTarGzip, blueprintArchive(t, false, strings.Repeat("z", 2048))}}})
	r := e.resolver(t, Options{Limits: ocm.Limits{MaxBlobBytes: 1024}})
	cv, err := r.Resolve(context.Background(), e.ref("acme.org/big", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Blueprint(context.Background(), cv.Root, ResourceRef{Name: "blueprint"})
	wantErr(t, err, `blueprint resource "blueprint" of component acme.org/big:1.0.0`, "larger than 1Ki", "--ocm-max-blob-bytes")
}

func TestBlueprintFilesAreTheCallersOwn(t *testing.T) {
	e := newEnv(t)
	e.push(t, component{name: "acme.org/app", version: "1.0.0", blobs: []blobResource{{"blueprint", blueprintTarGzip, blueprintArchive(t, true, "x")}}})
	r := e.resolver(t, Options{})
	cv, err := r.Resolve(context.Background(), e.ref("acme.org/app", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.Blueprint(context.Background(), cv.Root, ResourceRef{Name: "blueprint"})
	if err != nil {
		t.Fatal(err)
	}
	delete(first.Files, "blueprint.yaml")
	second, err := r.Blueprint(context.Background(), cv.Root, ResourceRef{Name: "blueprint"})
	if err != nil || second.Files["blueprint.yaml"] == "" {
		t.Errorf("a caller's change reached the cache: %v %v", second, err)
	}
}
