#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-scheduler and kube-controller-manager from the Go module
# proxy into a cache directory keyed by version. Idempotent: binaries already present are
# reused. Usage: hack/build-controlplane.sh [component ...]   (default: all four)
# Prints the binary directory on the last line of stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KV=v1.37.2
ETCDV=v3.7.3
OUT="${WORKLOADBUILDER_BIN_DIR:-${HOME}/.cache/workloadbuilder/k8s/${KV}/bin}"
mkdir -p "$OUT"
export GOWORK=off CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(etcd kube-apiserver kube-scheduler kube-controller-manager)

date_now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
LDF="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDF="$LDF -X $p.gitVersion=$KV -X $p.gitMajor=1 -X $p.gitMinor=37 -X $p.gitTreeState=clean -X $p.buildDate=$date_now"
done

build() {  # name, module dir, package, ldflags
  local name=$1 dir=$2 pkg=$3 ldf=$4
  if [ -x "$OUT/$name" ]; then
    echo "cached: $OUT/$name" >&2
    return 0
  fi
  command -v go >/dev/null || { echo "error: the Go toolchain (>= 1.26) is required to build $name" >&2; exit 2; }
  echo "building $name ($pkg) ..." >&2
  local start=$SECONDS
  (cd "$here/$dir" && go build -trimpath -ldflags "$ldf" -o "$OUT/$name.tmp" "$pkg")
  mv "$OUT/$name.tmp" "$OUT/$name"
  echo "built $name in $((SECONDS - start))s" >&2
}

for c in "${components[@]}"; do
  case "$c" in
    etcd) build etcd etcdbin go.etcd.io/etcd/server/v3 "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCDV" ;;
    kube-apiserver|kube-scheduler|kube-controller-manager)
      build "$c" k8sbins "k8s.io/kubernetes/cmd/$c" "$LDF" ;;
    *) echo "error: unknown component '$c'" >&2; exit 2 ;;
  esac
done
echo "$OUT"
