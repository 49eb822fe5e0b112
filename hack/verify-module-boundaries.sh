#!/usr/bin/env bash
# Fails when a binary's module requires another binary's module: binaries
# meet only through Kubernetes objects, and share code only through apis and
# kit, so each builds, tests and ships on its own.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=components.sh
source "${ROOT}/hack/components.sh"

declare -A binary_modules=()
for component in "${TERRACE_COMPONENTS[@]}"; do
  read -r _ module _ <<<"${component}"
  binary_modules[${module}]=1
done

failed=0
for module in "${!binary_modules[@]}"; do
  for other in "${!binary_modules[@]}"; do
    [[ "${other}" == "${module}" ]] && continue
    if grep -qE "^[[:space:]]*(require[[:space:]]+)?github\.com/terrace-dev/terrace/${other} " "${ROOT}/${module}/go.mod"; then
      echo "verify-module-boundaries: ${module}/go.mod requires ${other}, another binary's module; share code through apis or kit instead" >&2
      failed=1
    fi
  done
done
exit "${failed}"
