// Package ocm reads and writes component versions of the Open Component
// Model (OCM) in OCI registries, the subset Terrace needs, following the
// public OCM specification so that what it writes is read by the ocm CLI and
// Landscaper, and the reverse:
//
//   - component descriptors in schema v2 (meta.schemaVersion: v2) and
//     ocm.software/v3alpha1 (apiVersion/kind/metadata/spec), decoded into one
//     model (ComponentDescriptor, shaped as v2) and encoded as v2;
//   - the access types localBlob (legacy localOciBlob, localFilesystemBlob)
//     and ociArtifact (legacy ociRegistry, OCIImage);
//   - the OCI repository mapping: component <name> version <version> is the
//     image manifest tagged <version> (a "+" becomes ".build-") in
//     <baseUrl>/component-descriptors/<name>; its config is the component
//     config JSON ({"componentDescriptorLayer": <descriptor>}), its layer 0 a
//     tar holding component-descriptor.yaml, its other layers the local blobs,
//     addressed by digest (localReference). ResolveVersionByDigest reads a
//     version from the manifest at a digest instead of its tag, refusing
//     content that does not hash to it.
//
// Every read is bounded (Limits): a descriptor by MaxDescriptorBytes (default
// 4Mi), a blob by MaxBlobBytes (default 128Mi), transitive component
// references by MaxReferenceDepth (default 16) and MaxComponents (default
// 256). Limits.BindFlags binds them as --ocm-max-descriptor-bytes,
// --ocm-max-blob-bytes, --ocm-max-reference-depth and --ocm-max-components.
package ocm
