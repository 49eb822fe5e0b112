package helm

import (
	"encoding/json"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"

	helmv1alpha1 "github.com/terrace-dev/terrace/apis/deployers/helm/v1alpha1"
	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
	"github.com/terrace-dev/terrace/deployers/lib"
)

// ReleaseOwnerLabel is the label of a release (on its release Secrets)
// naming the UID of the deploy item that installed it. A release name is
// unique in its namespace, so two items naming the same release would
// otherwise upgrade and uninstall each other's release.
const ReleaseOwnerLabel = "deployer.terrace.dev/deploy-item-uid"

// ReasonReleaseTaken: the release belongs to another deploy item, or was
// installed outside Terrace.
const ReasonReleaseTaken = "ReleaseNameTaken"

// ownerLabels are the labels the item's releases carry.
func ownerLabels(di *lsv1alpha1.DeployItem) map[string]string {
	return map[string]string{ReleaseOwnerLabel: string(di.UID)}
}

// owns reports whether rel is the item's: it carries the item's UID, or no
// owner at all while the item records objects of a release (one it
// deployed before releases carried the label; its next upgrade labels it).
func owns(di *lsv1alpha1.DeployItem, rel *release.Release) bool {
	switch owner := rel.Labels[ReleaseOwnerLabel]; owner {
	case string(di.UID):
		return true
	case "":
		return recordsObjects(di)
	}
	return false
}

// checkOwner refuses to take over a release that is not the item's.
func checkOwner(di *lsv1alpha1.DeployItem, rel *release.Release) error {
	if owns(di, rel) {
		return nil
	}
	whose := "was installed outside Terrace"
	if owner := rel.Labels[ReleaseOwnerLabel]; owner != "" {
		whose = fmt.Sprintf("belongs to another deploy item (UID %s)", owner)
	}
	return lib.ConfigError(ReasonReleaseTaken, "spec.config.name: release %s/%s %s; choose another release name or namespace", rel.Namespace, rel.Name, whose)
}

// ownedRelease returns the last revision of the release if it is the
// item's, nil if there is none or it is another's.
func ownedRelease(ac *action.Configuration, di *lsv1alpha1.DeployItem, name string) (*release.Release, error) {
	last, err := ac.Releases.Last(name)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case !owns(di, last):
		return nil, nil
	}
	return last, nil
}

// recordsObjects reports whether the item's providerStatus lists objects.
func recordsObjects(di *lsv1alpha1.DeployItem) bool {
	ps, err := decodeProviderStatus(di)
	return err == nil && len(ps.ManagedResources) > 0
}

func decodeProviderStatus(di *lsv1alpha1.DeployItem) (*helmv1alpha1.ProviderStatus, error) {
	ps := &helmv1alpha1.ProviderStatus{}
	if di.Status.ProviderStatus == nil || len(di.Status.ProviderStatus.Raw) == 0 {
		return ps, nil
	}
	return ps, json.Unmarshal(di.Status.ProviderStatus.Raw, ps)
}
