package installation_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/installation-controller/internal/controller/installation"
	"github.com/terrace-dev/terrace/kit/ocm"
	"github.com/terrace-dev/terrace/kit/registrytest"
)

const blueprintMediaType = "application/vnd.gardener.landscaper.blueprint.v1+tar+gzip"

// componentSpec is a component version to push: blueprint resources (file
// systems, or raw content of a media type), OCI image resources and
// component references.
type componentSpec struct {
	name, version string
	blueprints    map[string]map[string]string
	raw           map[string]ocm.LocalBlob
	images        map[string]string
	refs          []ocm.ComponentReference
}

// push writes c to the OCM repository base (host/path) with kit/ocm, as
// `terrace component push` does.
func push(t *testing.T, base string, c componentSpec) {
	t.Helper()
	cd := &ocm.ComponentDescriptor{Meta: ocm.Meta{SchemaVersion: ocm.SchemaVersionV2}, Component: ocm.Component{
		Name: c.name, Version: c.version, Provider: ocm.Provider{Name: "acme.org"}, References: c.refs,
	}}
	blobs := map[string]ocm.LocalBlob{}
	for name, files := range c.blueprints {
		blobs[name] = ocm.BytesBlob(blueprintMediaType, blueprintArchive(t, files))
	}
	for name, b := range c.raw {
		blobs[name] = b
	}
	var list []ocm.LocalBlob
	for _, name := range sortedNames(blobs) {
		b := blobs[name]
		cd.Component.Resources = append(cd.Component.Resources, ocm.Resource{
			ElementMeta: ocm.ElementMeta{Name: name, Version: c.version}, Type: "blueprint", Relation: ocm.RelationLocal,
			Access: ocm.NewLocalBlobAccess(ocm.LocalBlobAccess{LocalReference: b.Digest.String(), MediaType: b.MediaType}),
		})
		list = append(list, b)
	}
	for name, ref := range c.images {
		cd.Component.Resources = append(cd.Component.Resources, ocm.Resource{
			ElementMeta: ocm.ElementMeta{Name: name, Version: c.version}, Type: "ociImage", Relation: ocm.RelationExternal,
			Access: ocm.NewOCIArtifactAccess(ref),
		})
	}
	if _, err := ocm.Push(context.Background(), &ocm.Repository{Base: base, PlainHTTP: true}, cd, list); err != nil {
		t.Fatalf("pushing %s:%s: %v", c.name, c.version, err)
	}
}

func sortedNames(m map[string]ocm.LocalBlob) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// blueprintArchive is files as a gzipped tar.
func blueprintArchive(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// componentInstallation is a root installation of resource bpResource of
// component name:version; rc nil leaves the repository to the Context.
func componentInstallation(ns, name string, rc *lsv1alpha1.RepositoryContext, component, version, bpResource string) *lsv1alpha1.Installation {
	inst := newInstallation(ns, name, nil, reconcileAnnotation...)
	inst.Spec.Blueprint = lsv1alpha1.BlueprintDefinition{Reference: &lsv1alpha1.BlueprintReference{ResourceName: bpResource}}
	inst.Spec.ComponentDescriptor = &lsv1alpha1.ComponentDescriptorDefinition{Reference: &lsv1alpha1.ComponentDescriptorReference{
		RepositoryContext: rc, ComponentName: component, Version: version,
	}}
	return inst
}

func ociContext(base string) *lsv1alpha1.RepositoryContext {
	return &lsv1alpha1.RepositoryContext{Type: "OCIRegistry", BaseURL: base}
}

// onlyItemConfig is the config of the execution's only deploy item.
func onlyItemConfig(g Gomega, ns, name string) string {
	exec, err := getExec(ns, name)()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exec.Spec.DeployItems).To(HaveLen(1))
	return string(exec.Spec.DeployItems[0].Config.Raw)
}

// A root installation reads its blueprint from the resource
// spec.blueprint.ref names of the component version spec.componentDescriptor
// names, in the repository of the namespace's default Context, with the
// Context's pull secret; its templates read the component version (.cd,
// .componentDescriptorDef, getResource) and its mock item deploys.
func TestComponentBlueprintFromContextRepository(t *testing.T) {
	ns, g := setup(t)
	base := registrytest.Start(t) + "/ocm"
	push(t, base, componentSpec{name: "example.org/app", version: "1.0.0",
		blueprints: map[string]map[string]string{"app-blueprint": simpleBlueprint(
			`      image: {{ (getResource .cd "name" "image").access.imageReference }}
      component: {{ .componentDescriptorDef.ref.componentName }}
      version: {{ .cd.component.version }}
      repository: {{ ociRefRepo (getResource .cd "name" "image").access.imageReference }}`)},
		images: map[string]string{"image": "registry.example.org/app/server:1.2.3"},
	})
	create(g, &corev1.Secret{ObjectMeta: metaNS(ns, "pull"), Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.org":{"auth":"dXNlcjpwYXNz"}}}`)}})
	create(g, &lsv1alpha1.Context{ObjectMeta: metaNS(ns, lsv1alpha1.DefaultContextName), RepositoryContext: ociContext(base),
		RegistryPullSecrets: []corev1.LocalObjectReference{{Name: "pull"}}, UseOCM: true})
	create(g, componentInstallation(ns, "app", nil, "example.org/app", "1.0.0", "app-blueprint"))

	g.Eventually(getInst(ns, "app"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded),
		func() string { i, _ := getInst(ns, "app")(); return lastError(i) })
	cfg := onlyItemConfig(g, ns, "app")
	g.Expect(cfg).To(ContainSubstring(`"image":"registry.example.org/app/server:1.2.3"`))
	g.Expect(cfg).To(ContainSubstring(`"component":"example.org/app"`))
	g.Expect(cfg).To(ContainSubstring(`"version":"1.0.0"`))
	g.Expect(cfg).To(ContainSubstring(`"repository":"registry.example.org/app/server"`))
}

// A blueprint's sub-installations read their blueprints from the component
// version: cd://componentReferences/<ref>/resources/<name> becomes the
// referenced component's ref and resource, {resourceName} a resource of the
// parent's component, whose componentDescriptor the sub-installation keeps.
func TestComponentSubInstallationsFromReferences(t *testing.T) {
	ns, g := setup(t)
	base := registrytest.Start(t) + "/ocm"
	push(t, base, componentSpec{name: "example.org/child", version: "2.0.0",
		blueprints: map[string]map[string]string{"child-blueprint": simpleBlueprint(`      from: {{ .cd.component.name }}`)}})
	push(t, base, componentSpec{name: "example.org/root", version: "1.0.0",
		refs: []ocm.ComponentReference{{ElementMeta: ocm.ElementMeta{Name: "child", Version: "2.0.0"}, ComponentName: "example.org/child"}},
		blueprints: map[string]map[string]string{
			"leaf-blueprint": simpleBlueprint(`      from: {{ .cd.component.name }}`),
			"root-blueprint": {"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
subinstallations:
- name: child
  blueprint:
    ref: cd://componentReferences/child/resources/child-blueprint
- name: leaf
  blueprint:
    ref: {resourceName: leaf-blueprint}
`}},
	})
	root := componentInstallation(ns, "root", ociContext("http://"+base), "example.org/root", "1.0.0", "root-blueprint")
	create(g, root)

	g.Eventually(getInst(ns, "root"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded),
		func() string { i, _ := getInst(ns, "root")(); return lastError(i) })
	child, leaf := subInstallation(g, ns, "child"), subInstallation(g, ns, "leaf")
	g.Expect(child.Spec.Blueprint.Reference).To(Equal(&lsv1alpha1.BlueprintReference{ResourceName: "child-blueprint"}))
	g.Expect(child.Spec.ComponentDescriptor.Reference).To(And(HaveField("ComponentName", "example.org/child"), HaveField("Version", "2.0.0"),
		HaveField("RepositoryContext.BaseURL", "http://"+base)))
	g.Expect(onlyItemConfig(g, ns, child.Name)).To(ContainSubstring(`"from":"example.org/child"`))
	g.Expect(leaf.Spec.Blueprint.Reference).To(Equal(&lsv1alpha1.BlueprintReference{ResourceName: "leaf-blueprint"}))
	g.Expect(leaf.Spec.ComponentDescriptor).To(Equal(root.Spec.ComponentDescriptor), "a resource of the parent's component keeps its componentDescriptor")
	g.Expect(onlyItemConfig(g, ns, leaf.Name)).To(ContainSubstring(`"from":"example.org/root"`))
}

// subInstallation finds the sub-installation of template name.
func subInstallation(g Gomega, ns, name string) *lsv1alpha1.Installation {
	list := &lsv1alpha1.InstallationList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns),
		client.MatchingLabels{lsv1alpha1.SubInstallationNameLabel: name})).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	return &list.Items[0]
}

// What cannot be read from a component version ends the job Failed, with a
// lastError naming the field, the component, the resource and the reason.
func TestComponentBadInputsFailTheJob(t *testing.T) {
	base := registrytest.Start(t) + "/ocm"
	push(t, base, componentSpec{name: "example.org/bad", version: "1.0.0",
		blueprints: map[string]map[string]string{"good": simpleBlueprint(""), "dangling": {"blueprint.yaml": `apiVersion: landscaper.gardener.cloud/v1alpha1
kind: Blueprint
subinstallations:
- name: sub
  blueprint:
    ref: cd://componentReferences/nope/resources/bp
`}},
		raw: map[string]ocm.LocalBlob{"text": ocm.BytesBlob("text/plain", []byte("not a blueprint"))},
	})
	rc := ociContext(base)
	for _, tc := range []struct {
		name string
		inst func(ns string) *lsv1alpha1.Installation
		want []string
	}{{
		name: "unknown version",
		inst: func(ns string) *lsv1alpha1.Installation {
			return componentInstallation(ns, "inst", rc, "example.org/bad", "9.9.9", "good")
		},
		want: []string{installation.ReasonComponentInvalid, "spec.componentDescriptor", "example.org/bad:9.9.9 in 127.0.0.1:", "not found"},
	}, {
		name: "missing resource",
		inst: func(ns string) *lsv1alpha1.Installation {
			return componentInstallation(ns, "inst", rc, "example.org/bad", "1.0.0", "absent")
		},
		want: []string{installation.ReasonBlueprintInvalid, "spec.blueprint.ref", `resource "absent" of component example.org/bad:1.0.0 not found`},
	}, {
		name: "not a blueprint media type",
		inst: func(ns string) *lsv1alpha1.Installation {
			return componentInstallation(ns, "inst", rc, "example.org/bad", "1.0.0", "text")
		},
		want: []string{installation.ReasonBlueprintInvalid, "spec.blueprint.ref", `resource "text" of component example.org/bad:1.0.0`, `media type "text/plain" is not a blueprint`},
	}, {
		name: "unsupported repository type",
		inst: func(ns string) *lsv1alpha1.Installation {
			return componentInstallation(ns, "inst", &lsv1alpha1.RepositoryContext{Type: "CommonTransportFormat", BaseURL: "/tmp/ctf"}, "example.org/bad", "1.0.0", "good")
		},
		want: []string{installation.ReasonComponentInvalid, "spec.componentDescriptor", `"CommonTransportFormat" is not supported`},
	}, {
		name: "sub-installation reference to a missing component reference",
		inst: func(ns string) *lsv1alpha1.Installation {
			return componentInstallation(ns, "inst", rc, "example.org/bad", "1.0.0", "dangling")
		},
		want: []string{installation.ReasonTemplateFailed, `subinstallation "sub": blueprint.ref`, `component example.org/bad:1.0.0 has no component reference "nope"`},
	}, {
		name: "ref without component version",
		inst: func(ns string) *lsv1alpha1.Installation {
			inst := componentInstallation(ns, "inst", rc, "example.org/bad", "1.0.0", "good")
			inst.Spec.ComponentDescriptor = nil
			return inst
		},
		want: []string{installation.ReasonBlueprintInvalid, "spec.blueprint.ref", "set spec.componentDescriptor"},
	}, {
		name: "getResource without component version",
		inst: func(ns string) *lsv1alpha1.Installation {
			return newInstallation(ns, "inst", simpleBlueprint(`      image: {{ getResource .cd "name" "image" }}`), reconcileAnnotation...)
		},
		want: []string{installation.ReasonTemplateFailed, "getResource: the installation has no component version"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ns, g := setup(t)
			create(g, tc.inst(ns))
			g.Eventually(getInst(ns, "inst"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseFailed))
			got, _ := getInst(ns, "inst")()
			for _, part := range tc.want {
				g.Expect(lastError(got)).To(ContainSubstring(part))
			}
		})
	}
}

// A missing pull secret of the Context fails the job naming the Context
// and the Secret.
func TestComponentMissingPullSecretFailsTheJob(t *testing.T) {
	ns, g := setup(t)
	create(g, &lsv1alpha1.Context{ObjectMeta: metaNS(ns, "ocm"), RegistryPullSecrets: []corev1.LocalObjectReference{{Name: "absent"}}})
	inst := componentInstallation(ns, "inst", ociContext("127.0.0.1:1/ocm"), "example.org/app", "1.0.0", "bp")
	inst.Spec.Context = "ocm"
	create(g, inst)
	g.Eventually(getInst(ns, "inst"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseFailed))
	got, _ := getInst(ns, "inst")()
	g.Expect(lastError(got)).To(ContainSubstring("Context ocm registryPullSecrets: Secret " + ns + "/absent does not exist"))
}

// A registry that does not answer is retried, with the error in lastError,
// and the job goes on once it answers.
func TestComponentRegistryDownIsRetried(t *testing.T) {
	ns, g := setup(t)
	host := registrytest.Start(t)
	push(t, host+"/ocm", componentSpec{name: "example.org/app", version: "1.0.0",
		blueprints: map[string]map[string]string{"bp": simpleBlueprint("")}})
	var down atomic.Bool
	down.Store(true)
	proxy := flakyProxy(t, host, &down)
	create(g, componentInstallation(ns, "inst", ociContext(proxy+"/ocm"), "example.org/app", "1.0.0", "bp"))

	g.Eventually(getInst(ns, "inst"), timeout, interval).Should(And(inPhase(lsv1alpha1.PhaseInit),
		WithTransform(lastError, And(ContainSubstring(installation.ReasonTransient), ContainSubstring("spec.componentDescriptor"), ContainSubstring(proxy)))))
	g.Consistently(getInst(ns, "inst"), "2s", interval).ShouldNot(inPhase(lsv1alpha1.PhaseFailed))
	down.Store(false)
	g.Eventually(getInst(ns, "inst"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded))
}

// flakyProxy forwards to the registry at host, answering 503 while down;
// it returns its own host:port on loopback.
func flakyProxy(t *testing.T, host string, down *atomic.Bool) string {
	t.Helper()
	forward := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "registry down", http.StatusServiceUnavailable)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// The API server refuses a blueprint with both inline and ref, and a
// componentDescriptor with both ref and inline.
func TestComponentDefinitionsAreRefusedAtApply(t *testing.T) {
	ns, g := setup(t)
	both := componentInstallation(ns, "both", nil, "example.org/app", "1.0.0", "bp")
	both.Spec.Blueprint.Inline = &lsv1alpha1.InlineBlueprint{Filesystem: simpleBlueprint("")}
	g.Expect(env.Client.Create(context.Background(), both)).To(MatchError(ContainSubstring("spec.blueprint needs exactly one of inline and ref")))

	twice := componentInstallation(ns, "twice", nil, "example.org/app", "1.0.0", "bp")
	inline := lsv1alpha1.NewAnyJSON([]byte(`{"meta":{"schemaVersion":"v2"}}`))
	twice.Spec.ComponentDescriptor.Inline = &inline
	g.Expect(env.Client.Create(context.Background(), twice)).To(MatchError(ContainSubstring("either by ref or inline, not both")))
}

// An inline component descriptor is read as given: its blueprint resource
// comes from the repository its last repositoryContexts entry names.
func TestComponentInlineDescriptor(t *testing.T) {
	ns, g := setup(t)
	base := registrytest.Start(t) + "/ocm"
	push(t, base, componentSpec{name: "example.org/inline", version: "1.0.0",
		blueprints: map[string]map[string]string{"bp": simpleBlueprint(`      from: {{ .cd.component.name }}`)}})
	cd, err := ocm.Resolve(context.Background(), &ocm.Repository{Base: base, PlainHTTP: true}, "example.org/inline", "1.0.0")
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := ocm.EncodeV2JSON(cd)
	g.Expect(err).NotTo(HaveOccurred())
	inst := componentInstallation(ns, "inst", nil, "", "", "bp")
	inline := lsv1alpha1.NewAnyJSON(raw)
	inst.Spec.ComponentDescriptor = &lsv1alpha1.ComponentDescriptorDefinition{Inline: &inline}
	create(g, inst)
	g.Eventually(getInst(ns, "inst"), timeout, interval).Should(finishedIn(lsv1alpha1.PhaseSucceeded),
		func() string { i, _ := getInst(ns, "inst")(); return lastError(i) })
	g.Expect(onlyItemConfig(g, ns, "inst")).To(ContainSubstring(`"from":"example.org/inline"`))
}
