package helm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// The format of Helm 3's release records in Secrets: the helm CLI, other
// Helm-based tools and this deployer read and write the same records.
const (
	releaseSecretType = corev1.SecretType("helm.sh/release.v1")
	releaseDataKey    = "release"
	releaseOwner      = "helm"
)

// Labels Helm puts on every release record; the others are the release's
// own (release.Labels).
var recordLabels = []string{"name", "owner", "status", "version", "createdAt", "modifiedAt"}

// releaseSecrets stores Helm release records in the Secrets of one
// namespace, in Helm's own format, as Helm's Secret driver does; it differs
// in reusing its compressors (recordCodec).
type releaseSecrets struct {
	secrets   corev1client.SecretInterface
	namespace string
	// maxRecordBytes bounds a record's release JSON, decompressed
	// (Options.MaxReleaseRecordBytes).
	maxRecordBytes int64
	log            func(format string, v ...any)
}

var _ driver.Driver = (*releaseSecrets)(nil)

// newReleaseSecrets stores records in secrets, the Secrets of namespace.
func newReleaseSecrets(secrets corev1client.SecretInterface, namespace string, maxRecordBytes int64, log func(string, ...any)) *releaseSecrets {
	return &releaseSecrets{secrets: secrets, namespace: namespace, maxRecordBytes: maxRecordBytes, log: log}
}

// recordTooLargeError is the error of a release record whose release is
// larger, decompressed, than --max-release-record-bytes.
type recordTooLargeError struct {
	// Secret is the record's namespace/name.
	Secret string
	Limit  int64
}

func (e *recordTooLargeError) Error() string {
	return fmt.Sprintf("release record Secret %s decompresses to more than %s (--max-release-record-bytes); it was not read further",
		e.Secret, resource.NewQuantity(e.Limit, resource.BinarySI))
}

// decode is the release of the record sec.
func (s *releaseSecrets) decode(sec *corev1.Secret) (*release.Release, error) {
	rel, err := decodeRecord(sec.Data[releaseDataKey], s.maxRecordBytes)
	if errors.Is(err, errRecordTooLarge) {
		return nil, &recordTooLargeError{Secret: s.namespace + "/" + sec.Name, Limit: s.maxRecordBytes}
	}
	return rel, err
}

// Name is Helm's name of its Secret driver: Helm compares driver names.
func (s *releaseSecrets) Name() string { return driver.SecretsDriverName }

// Get reads the record named key; its labels are the release's own.
func (s *releaseSecrets) Get(key string) (*release.Release, error) {
	sec, err := s.secrets.Get(context.Background(), key, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, driver.ErrReleaseNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading release record %s: %w", key, err)
	}
	rel, err := s.decode(sec)
	if err != nil {
		return nil, fmt.Errorf("decoding release record %s: %w", key, err)
	}
	rel.Labels = customLabels(sec.Labels)
	return rel, nil
}

// List reads every release record of the namespace that filter accepts;
// records that do not decode are left out.
func (s *releaseSecrets) List(filter func(*release.Release) bool) ([]*release.Release, error) {
	all, err := s.list(labels.Set{"owner": releaseOwner}.AsSelector().String())
	if err != nil {
		return nil, err
	}
	var out []*release.Release
	for _, rel := range all {
		if filter(rel) {
			out = append(out, rel)
		}
	}
	return out, nil
}

// Query reads the release records with all of the given labels.
func (s *releaseSecrets) Query(want map[string]string) ([]*release.Release, error) {
	for k, v := range want {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("querying release records: label %s: %q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	out, err := s.list(labels.SelectorFromSet(want).String())
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	return out, nil
}

// list decodes the records the selector matches; a record's labels are all
// of its Secret's, as Helm's drivers return them. A record over the bound
// fails the listing: left out, it would hide a revision, and Helm would
// take the release for absent or older than it is.
func (s *releaseSecrets) list(selector string) ([]*release.Release, error) {
	secs, err := s.secrets.List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing release records: %w", err)
	}
	out := make([]*release.Release, 0, len(secs.Items))
	for i := range secs.Items {
		sec := &secs.Items[i]
		rel, err := s.decode(sec)
		var large *recordTooLargeError
		if errors.As(err, &large) {
			return nil, err
		}
		if err != nil {
			s.log("release record %s does not decode: %v", sec.Name, err)
			continue
		}
		rel.Labels = sec.Labels
		out = append(out, rel)
	}
	return out, nil
}

// Create writes a new record; driver.ErrReleaseExists when key is taken.
func (s *releaseSecrets) Create(key string, rel *release.Release) error {
	sec, err := recordSecret(key, rel, "createdAt")
	if err != nil {
		return err
	}
	_, err = s.secrets.Create(context.Background(), sec, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return driver.ErrReleaseExists
	}
	if err != nil {
		return fmt.Errorf("creating release record %s: %w", key, err)
	}
	return nil
}

// Update replaces the record named key.
func (s *releaseSecrets) Update(key string, rel *release.Release) error {
	sec, err := recordSecret(key, rel, "modifiedAt")
	if err != nil {
		return err
	}
	if _, err := s.secrets.Update(context.Background(), sec, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating release record %s: %w", key, err)
	}
	return nil
}

// Delete removes the record named key and returns the release it held.
func (s *releaseSecrets) Delete(key string) (*release.Release, error) {
	rel, err := s.Get(key)
	if err != nil {
		return nil, err
	}
	err = s.secrets.Delete(context.Background(), key, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil, driver.ErrReleaseNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("deleting release record %s: %w", key, err)
	}
	return rel, nil
}

// recordSecret is rel's record named key: the release's own labels, the
// time label stamp (createdAt or modifiedAt) set to now, and Helm's labels.
func recordSecret(key string, rel *release.Release, stamp string) (*corev1.Secret, error) {
	if rel.Info == nil {
		return nil, fmt.Errorf("release record %s: the release has no info (status)", key)
	}
	data, err := encodeRecord(rel)
	if err != nil {
		return nil, fmt.Errorf("encoding release record %s: %w", key, err)
	}
	lbs := customLabels(rel.Labels)
	if created, ok := rel.Labels["createdAt"]; ok {
		lbs["createdAt"] = created
	}
	lbs[stamp] = strconv.FormatInt(time.Now().Unix(), 10)
	lbs["name"], lbs["owner"] = rel.Name, releaseOwner
	lbs["status"], lbs["version"] = rel.Info.Status.String(), strconv.Itoa(rel.Version)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: lbs},
		Type:       releaseSecretType,
		Data:       map[string][]byte{releaseDataKey: data},
	}, nil
}

// customLabels are the labels of lbs that Helm does not set itself.
func customLabels(lbs map[string]string) map[string]string {
	out := maps.Clone(lbs)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range recordLabels {
		delete(out, k)
	}
	return out
}

// errEmptyRecord: a record Secret without data.release.
var errEmptyRecord = errors.New("no data." + releaseDataKey)
