#!/usr/bin/env bash
# Build the helm CLI (helm.sh/helm/v4) from the Go module proxy into a cache directory keyed by
# version, like hack/build-controlplane.sh does for the control plane. Idempotent: a binary
# already present is reused. The module versions are pinned in hack/helmbin/go.{mod,sum}.
# Usage: hack/build-helm.sh        Prints the binary directory on the last line of stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HELMV=v4.3.2
OUT="${WORKLOADBUILDER_HELM_DIR:-${HOME}/.cache/workloadbuilder/helm/${HELMV}/bin}"
mkdir -p "$OUT"
export GOWORK=off CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly

if [ -x "$OUT/helm" ]; then
  echo "cached: $OUT/helm" >&2
else
  command -v go >/dev/null || { echo "error: the Go toolchain (>= 1.26) is required to build helm" >&2; exit 2; }
  echo "building helm $HELMV (helm.sh/helm/v4/cmd/helm) ..." >&2
  start=$SECONDS
  (cd "$here/helmbin" && go build -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELMV -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
    -o "$OUT/helm.tmp" helm.sh/helm/v4/cmd/helm)
  mv "$OUT/helm.tmp" "$OUT/helm"
  echo "built helm in $((SECONDS - start))s" >&2
fi
echo "$OUT"
