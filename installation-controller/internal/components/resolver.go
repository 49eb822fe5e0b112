package components

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sync/singleflight"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/kit/ocm"
)

// Resolver reads component versions and their blueprints through a cache
// keyed by digest. It is safe for concurrent use; one Resolver serves the
// whole process so that every installation shares its cache.
type Resolver struct {
	opts   Options
	client *http.Client
	memory *memoryCache
	disk   *diskCache
	pins   *jobPins
	flight singleflight.Group
}

// NewResolver returns a Resolver. client is the HTTP client registries are
// spoken to with; nil uses kit/ocm's retrying default.
func NewResolver(opts Options, client *http.Client) (*Resolver, error) {
	opts = opts.withDefaults()
	r := &Resolver{opts: opts, client: client, memory: newMemoryCache(opts.CacheBytes), pins: newJobPins(opts.JobPins)}
	if opts.CacheDir != "" {
		d, err := newDiskCache(opts.CacheDir, opts.CacheDiskBytes)
		if err != nil {
			return nil, fmt.Errorf("the component cache directory (--%s) %s: %w", FlagCacheDir, opts.CacheDir, err)
		}
		r.disk = d
	}
	return r, nil
}

// Request is what an installation says about its component version.
type Request struct {
	// Definition is spec.componentDescriptor.
	Definition lsv1alpha1.ComponentDescriptorDefinition
	// RepositoryContext is the Context's, used when the reference names
	// none and for an inline descriptor's references.
	RepositoryContext *lsv1alpha1.RepositoryContext
	// Overwrites are the Context's componentVersionOverwrites, in order.
	Overwrites []lsv1alpha1.ComponentVersionOverwrite
	// PullSecrets are the .dockerconfigjson values of the Context's
	// registryPullSecrets, keyed by Secret name.
	PullSecrets map[string][]byte
	// Job, when set, is the job resolving: its later resolutions read the
	// digests its first one read, without looking the tags up again.
	Job Job
}

// ComponentVersion is a resolved component version and every version its
// component references reach.
type ComponentVersion struct {
	Root *Component
	// Components holds the root and every referenced version, keyed by
	// "<name>:<version>".
	Components map[string]*Component
	// Overwritten describes each overwrite applied, e.g.
	// "github.com/a/b:1.0 -> github.com/a/c:1.1 in example.org/ocm".
	Overwritten []string
	// pinned are the digests the job resolved before (read only); read
	// those this resolution read, by pinKey.
	pinned, read map[string]digest.Digest
}

// Component is one component version as read. Its Descriptor is shared
// with the cache and with other resolutions: it must not be changed.
type Component struct {
	Descriptor *ocm.ComponentDescriptor
	// Digest is the manifest digest it was read from; empty for an inline
	// descriptor.
	Digest digest.Digest
	// Repository is where it was read from (and its local blobs are);
	// nil for an inline descriptor without a repository.
	Repository *ocm.Repository
	// RepositoryContext is Repository as a repository context.
	RepositoryContext *lsv1alpha1.RepositoryContext
	// layers are the layers of its manifest (nil for an inline
	// descriptor): local blobs are read without fetching it again.
	layers []ocispec.Descriptor
	// references maps a component reference's name to the key of the
	// version it resolved to (after overwrites).
	references map[string]string
}

// Key is "<name>:<version>".
func (c *Component) Key() string { return c.Descriptor.Key() }

// Resolve reads the component version req names and, transitively, the
// versions its component references name; within req.Job, each at the
// digest the job first read.
func (r *Resolver) Resolve(ctx context.Context, req Request) (*ComponentVersion, error) {
	cv, err := r.resolve(ctx, req)
	if err != nil {
		return nil, err
	}
	r.pins.remember(req.Job, cv.read)
	return cv, nil
}

func (r *Resolver) resolve(ctx context.Context, req Request) (*ComponentVersion, error) {
	creds, err := credentials(req.PullSecrets)
	if err != nil {
		return nil, err
	}
	def := req.Definition
	switch {
	case def.Reference != nil && def.Inline != nil:
		return nil, fmt.Errorf("spec.componentDescriptor: give either ref or inline, not both")
	case def.Inline != nil:
		return r.resolveInline(ctx, req, creds)
	case def.Reference == nil:
		return nil, fmt.Errorf("spec.componentDescriptor: neither ref nor inline is set")
	}
	ref := def.Reference
	rc := ref.RepositoryContext
	if rc == nil {
		rc = req.RepositoryContext
	}
	if rc == nil {
		return nil, fmt.Errorf("component %s:%s: no repository context: set spec.componentDescriptor.ref.repositoryContext or the Context's repositoryContext", ref.ComponentName, ref.Version)
	}
	cv := r.newComponentVersion(req.Job)
	target := cv.overwrite(req.Overwrites, versionRef{rc, ref.ComponentName, ref.Version})
	root, err := r.readVersion(ctx, cv, target, creds)
	if err != nil {
		return nil, err
	}
	cv.Root = root
	cv.Components[root.Key()] = root
	if err := r.resolveReferences(ctx, cv, req.Overwrites, creds); err != nil {
		return nil, err
	}
	return cv, nil
}

// resolveInline decodes an inline descriptor; its references are read
// from the Context's repository context, else its own last one.
func (r *Resolver) resolveInline(ctx context.Context, req Request, creds *ocm.DockerConfig) (*ComponentVersion, error) {
	cd, err := ocm.Decode(req.Definition.Inline.RawMessage)
	if err != nil {
		return nil, fmt.Errorf("spec.componentDescriptor.inline is not a component descriptor: %w", err)
	}
	root := &Component{Descriptor: cd, RepositoryContext: req.RepositoryContext}
	if root.RepositoryContext == nil {
		if n := len(cd.Component.RepositoryContexts); n > 0 {
			last := cd.Component.RepositoryContexts[n-1]
			root.RepositoryContext = &lsv1alpha1.RepositoryContext{Type: last.Type, BaseURL: last.BaseURL, SubPath: last.SubPath}
		}
	}
	if root.RepositoryContext != nil {
		repo, err := r.repository(root.RepositoryContext, creds)
		if err != nil {
			return nil, fmt.Errorf("inline component %s: %w", cd.Key(), err)
		}
		root.Repository = repo
	}
	cv := r.newComponentVersion(req.Job)
	cv.Root, cv.Components[cd.Key()] = root, root
	if err := r.resolveReferences(ctx, cv, req.Overwrites, creds); err != nil {
		return nil, err
	}
	return cv, nil
}

func (r *Resolver) newComponentVersion(job Job) *ComponentVersion {
	return &ComponentVersion{Components: map[string]*Component{}, pinned: r.pins.of(job), read: map[string]digest.Digest{}}
}

// readVersion reads one component version through the cache: the tag is
// looked up once per job (cv.pinned), the content read once per digest and
// by that digest, so a job reads what it started with after the tag moved.
func (r *Resolver) readVersion(ctx context.Context, cv *ComponentVersion, ref versionRef, creds *ocm.DockerConfig) (*Component, error) {
	repo, err := r.repository(ref.rc, creds)
	if err != nil {
		return nil, fmt.Errorf("component %s:%s: %w", ref.name, ref.version, err)
	}
	pin := pinKey(repo.Base, ref.name, ref.version)
	dg, pinned := cv.pinned[pin]
	if !pinned {
		if dg, err = ocm.ResolveDigest(ctx, repo, ref.name, ref.version); err != nil {
			return nil, err
		}
	}
	v, err := r.cachedVersion(ctx, repo, ref, dg)
	var nf *ocm.NotFoundError
	if pinned && errors.As(err, &nf) {
		return nil, &ChangedDuringJobError{Component: ref.name + ":" + ref.version, Registry: repo.Base, Digest: dg, Err: err}
	}
	if err != nil {
		return nil, err
	}
	cv.read[pin] = v.Digest
	return r.component(v, repo, ref.rc), nil
}

// cachedVersion is the version at digest dg from the cache, else read from
// the registry by that digest; its descriptor must be of ref's version.
func (r *Resolver) cachedVersion(ctx context.Context, repo *ocm.Repository, ref versionRef, dg digest.Digest) (*ocm.Version, error) {
	key := "cd:" + ref.name + ":" + ref.version + "@" + dg.String()
	if v, ok := r.memory.get(key); ok {
		return v.(*ocm.Version), nil
	}
	v, err, _ := r.flight.Do(key, func() (any, error) {
		// A flight that ended between the lookup above and this one
		// cached the version already.
		if v, ok := r.memory.get(key); ok {
			return v, nil
		}
		v, err := ocm.ResolveVersionByDigest(ctx, repo, ref.name, dg)
		if err != nil {
			return nil, err
		}
		if got := v.Descriptor.Component.Version; got != ref.version {
			return nil, fmt.Errorf("component %s:%s in %s: the manifest %s holds version %s", ref.name, ref.version, repo.Base, dg, got)
		}
		r.memory.put(key, v, descriptorSize(v.Descriptor))
		return v, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*ocm.Version), nil
}

func (r *Resolver) component(v *ocm.Version, repo *ocm.Repository, rc *lsv1alpha1.RepositoryContext) *Component {
	return &Component{Descriptor: v.Descriptor, Digest: v.Digest, Repository: repo, RepositoryContext: rc, layers: v.Layers}
}

// descriptorSize is what a cached descriptor is charged: its JSON size.
func descriptorSize(cd *ocm.ComponentDescriptor) int64 {
	data, err := json.Marshal(cd)
	if err != nil {
		return 1 << 20
	}
	return int64(len(data))
}

// repository opens the OCI repository a repository context names. Plain
// HTTP is spoken when the baseUrl says http:// or the registry is on
// loopback.
func (r *Resolver) repository(rc *lsv1alpha1.RepositoryContext, creds *ocm.DockerConfig) (*ocm.Repository, error) {
	if !ocm.IsOCIRepositoryType(rc.Type) {
		return nil, fmt.Errorf("repository context of type %q is not supported: Terrace reads OCI registries (type OCIRegistry or ociRegistry)", rc.Type)
	}
	base, plainHTTP, err := ocm.ParseBaseURL(rc.BaseURL, rc.SubPath)
	if err != nil {
		return nil, fmt.Errorf("repository context: %w", err)
	}
	repo := &ocm.Repository{
		Base: base, PlainHTTP: plainHTTP, PlainHTTPFor: ocm.IsLoopbackHost,
		Credentials: creds.CredentialFunc(), Client: r.client, Limits: r.opts.Limits,
	}
	if ocm.IsLoopbackHost(repo.Host()) {
		repo.PlainHTTP = true
	}
	return repo, nil
}

// credentials merges the pull secrets' docker configs; a later Secret (by
// name) wins on the same registry.
func credentials(secrets map[string][]byte) (*ocm.DockerConfig, error) {
	names := make([]string, 0, len(secrets))
	for name := range secrets {
		names = append(names, name)
	}
	sort.Strings(names)
	var merged *ocm.DockerConfig
	for _, name := range names {
		cfg, err := ocm.ParseDockerConfig(secrets[name])
		if err != nil {
			return nil, fmt.Errorf("registry pull secret %q: %w", name, err)
		}
		merged = merged.Merge(cfg)
	}
	return merged, nil
}

// describe is a repository context in short, for messages.
func describe(rc *lsv1alpha1.RepositoryContext) string {
	if rc == nil {
		return "no repository"
	}
	return strings.TrimSuffix(rc.BaseURL+"/"+rc.SubPath, "/")
}
