#!/usr/bin/env bash
# Generates deepcopy functions and CRD YAML for the apis module in directory $1
# (apis/, or a copy of it when make verify-generate checks for drift).
# CONTROLLER_GEN is the pinned controller-gen binary the Makefile installs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$1"
: "${CONTROLLER_GEN:?set CONTROLLER_GEN to the pinned controller-gen (make generate does)}"

cd "${dir}"
"${CONTROLLER_GEN}" object:headerFile="${ROOT}/hack/boilerplate.go.txt" paths=./...
# CRDs are regenerated from scratch so that a removed type leaves no stale file.
rm -f config/crd/bases/*.yaml
# Only the CRD groups: the deployers' provider configs are not CRDs.
"${CONTROLLER_GEN}" crd paths=./landscaper/... paths=./appstudio/... paths=./toolchain/... \
  output:crd:artifacts:config=config/crd/bases
