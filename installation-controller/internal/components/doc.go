// Package components resolves the OCM component versions installations
// name (spec.componentDescriptor) and reads what blueprints take from them,
// on top of kit/ocm:
//
//   - Resolver.Resolve reads a component version from the repository
//     context of a Request (the reference's own, else the Context's), with
//     the credentials of kubernetes.io/dockerconfigjson Secrets and the
//     Context's componentVersionOverwrites applied to the root and to every
//     component reference, and resolves component references transitively
//     (bounded by kit/ocm's Limits); an inline descriptor's references are
//     read from the Context's repository context, else its own last one.
//   - A cache keyed by manifest digest: a version's tag is looked up once
//     per job (Request.Job; the digests a job read are remembered per
//     installation within Options.JobPins), its descriptor and blueprints
//     are read once per digest and kept in memory within Options.CacheBytes and, when
//     Options.CacheDir is set, blueprint archives on disk within
//     Options.CacheDiskBytes. Concurrent resolutions of one digest share one
//     read.
//   - Resolver.Blueprint extracts a blueprint resource (a local blob or an
//     OCI artifact, as tar or tar+gzip in the media types Landscaper
//     accepts) into a filesystem map, bounded in files and bytes, refusing
//     paths that leave the blueprint. Blueprint URIs of sub-installations
//     (cd://resources/<name>, cd://componentReferences/<ref>/.../resources/<name>)
//     are parsed by ParseURI and resolved by Resolver.BlueprintByURI.
//   - TemplateValues and FuncMap give GoTemplate executions the inputs .cd,
//     .components and .componentDescriptorDef and the functions getResource,
//     getResources, getComponent, getRepositoryContext, getResourceKey,
//     parseOCIRef, ociRefRepo and ociRefVersion, as Landscaper does.
//     .components lists the referenced versions, not the root (that is
//     .cd). getResourceKey takes a cd:// URI relative to the installation's
//     component and returns a ResourceKey (see EncodeResourceKey) that a
//     deployer decodes to read the resource itself. parseOCIRef gives a
//     reference's digest as its version when it has one, else its tag.
//
// Bounds (Options.BindFlags; kit/ocm's --ocm-max-* flags too):
//
//	--component-cache-bytes       64Mi  memory of cached descriptors and blueprints
//	--component-cache-dir         ""    directory of cached blueprint archives (off)
//	--component-cache-disk-bytes  512Mi disk of cached blueprint archives
//	--max-blueprint-files         1000  files of one blueprint
//	--max-blueprint-bytes         16Mi  extracted bytes of one blueprint
//	--component-job-pins          10000 installations whose job's digests are remembered
//
// Every error names the component version, the resource or reference and
// the registry involved, and the reason; one over a bound names the flag.
package components
