#!/usr/bin/env bash
# Builds the container images without a registry: the Go binaries on this
# host, then the Dockerfile's targets from them, and, for the offline run of
# docker-compose.yml (deploy/compose.offline.yml), images of Debian's Redis,
# HAProxy and Prometheus packages on a debootstrap'd Debian.
#
#   scripts/images.sh                  # every image below (needs root, debootstrap, a docker engine)
#   scripts/images.sh binaries DIR     # only the binaries and the image root, into DIR
#                                      # (what the Dockerfile's build stage runs)
#   scripts/images.sh rootfs           # only the cached Debian root filesystem (needs root and
#                                      # debootstrap, no engine): .ci/run makes it while the tests run
#
#   mcpqueue/api:local  mcpqueue/worker:local  mcpqueue/nats:local              Dockerfile targets, FROM scratch
#   mcpqueue-offline/redis:local  mcpqueue-offline/haproxy:local  mcpqueue-offline/prometheus:local
#
# Environment:
#   DOCKER_HOST          the engine (scripts/engine.sh start prints it)
#   DOCKER               the docker client; default docker, or Debian's
#                        /usr/bin/docker when docker has no buildx (BuildKit is needed)
#   MCPQ_IMAGES_CACHE    where the Debian root filesystem is kept between runs
#                        (default ~/.cache/mcpqueue-images); delete it to rebuild
#   MCPQ_DEBIAN_SUITE    default this host's Debian codename
#   MCPQ_DEBIAN_MIRROR   default the mirror this host's apt uses for Debian
#   VERSION, REVISION    default git describe --tags --always --dirty, git rev-parse HEAD
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cli=github.com/mcpqueue/mcpqueue/internal/cli # where Version reads the linker flags
uid=65532

# binaries DIR: DIR/bin/{api,worker,healthcheck,nats-server}, static; DIR/root/
# (etc/passwd, etc/group, the CA bundle); DIR/home/nonroot/ and DIR/data/,
# which the Dockerfile copies as owned by the user.
binaries() {
  local out=$1
  local version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
  local revision=${REVISION:-$(git rev-parse HEAD 2>/dev/null || true)}
  mkdir -p "$out/bin" "$out/root/etc/ssl/certs" "$out/home/nonroot" "$out/data"
  CGO_ENABLED=0 go build -trimpath \
    -ldflags="-s -w -X $cli.linkedVersion=$version -X $cli.linkedRevision=$revision" \
    -o "$out/bin/" ./cmd/api ./cmd/worker ./cmd/healthcheck github.com/nats-io/nats-server/v2
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n' $uid $uid >"$out/root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:%d:\n' $uid >"$out/root/etc/group"
  cp /etc/ssl/certs/ca-certificates.crt "$out/root/etc/ssl/certs/"
}

if [ "${1:-}" = binaries ]; then
  [ $# -eq 2 ] || { echo "usage: $0 binaries DIR" >&2; exit 2; }
  binaries "$2"
  exit 0
fi
mode=all
if [ "${1:-}" = rootfs ] && [ $# -eq 1 ]; then
  mode=rootfs
elif [ $# -ne 0 ]; then
  echo "usage: $0 [binaries DIR | rootfs]" >&2
  exit 2
fi
export VERSION=${VERSION:-$(git describe --tags --always --dirty)} REVISION=${REVISION:-$(git rev-parse HEAD)}

if [ -z "${DOCKER:-}" ]; then
  DOCKER=docker
  if ! docker buildx version >/dev/null 2>&1 && [ -x /usr/bin/docker ]; then
    DOCKER=/usr/bin/docker # Debian's docker.io: BuildKit built in
  fi
fi
export DOCKER_BUILDKIT=1
cache=${MCPQ_IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcpqueue-images}
mkdir -p "$cache"
work=$(mktemp -d)
# The root filesystem may still have /proc mounted if debootstrap was stopped.
cleanup() {
  findmnt -rn -o TARGET | { grep "^$work/" || true; } | sort -r | xargs -r umount
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

mark=io.github.mcpqueue.built-by=scripts/images.sh # on every image, for the clean-up at the end

# build TAG ARGS...: docker build, its output kept for when it fails.
build() {
  local tag=$1 start=$SECONDS
  shift
  if ! "$DOCKER" build --progress=plain --label "$mark" -t "$tag" "$@" >"$work/build.log" 2>&1; then
    cat "$work/build.log" >&2
    echo "images.sh: building $tag failed" >&2
    exit 1
  fi
  echo "images.sh: $tag ($((SECONDS - start))s)"
}

# ---- the Dockerfile's targets, from binaries built here ----
if [ "$mode" = all ]; then
  start=$SECONDS
  binaries "$work/context/out"
  echo "images.sh: binaries ($((SECONDS - start))s)"
  args=(--build-arg BINARIES=prebuilt --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION"
    --build-arg "CREATED=$(git log -1 --format=%cI)" # the commit's time: a rebuild is the same image
    --build-arg "NATS_VERSION=$(go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2 | sed 's/^v//')"
    -f Dockerfile "$work/context")
  for target in api worker nats; do
    build "mcpqueue/$target:local" --target "$target" "${args[@]}"
  done
fi

# ---- Redis, HAProxy and Prometheus from Debian's packages ----
packages=redis-server,haproxy,prometheus,wget # wget: the compose file's health checks
suite=${MCPQ_DEBIAN_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}
[ -n "$suite" ] || { echo "images.sh: not a Debian host: set MCPQ_DEBIAN_SUITE and MCPQ_DEBIAN_MIRROR" >&2; exit 1; }

# mirror: the first Debian suite (not -security, -updates) in this host's apt sources.
mirror() {
  if [ -n "${MCPQ_DEBIAN_MIRROR:-}" ]; then echo "$MCPQ_DEBIAN_MIRROR"; return; fi
  local m
  m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v RS= -v s="$suite" '
    { uri = ""; hit = 0
      for (i = 1; i <= NF; i++) {
        if ($i == "URIs:") uri = $(i + 1)
        if ($i == s) hit = 1
      }
      if (hit && uri != "") { print uri; exit } }')
  [ -n "$m" ] || m=$(awk -v s="$suite" '$1 == "deb" && $3 == s { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
  [ -n "$m" ] || { echo "images.sh: no $suite in /etc/apt/sources*: set MCPQ_DEBIAN_MIRROR" >&2; exit 1; }
  echo "$m"
}

# rootfs TAR: a minimal Debian with the packages, /data for Redis and
# /prometheus for Prometheus owned by their users, apt's lists and the docs
# left out; the packages' versions go to TAR.versions.
rootfs() {
  local tar=$1 dir="$work/rootfs"
  mkdir "$dir"
  if ! debootstrap --variant=minbase --include="$packages" "$suite" "$dir" "$(mirror)" >"$work/debootstrap.log" 2>&1; then
    tail -40 "$work/debootstrap.log" >&2
    echo "images.sh: debootstrap failed" >&2
    exit 1
  fi
  chroot "$dir" install -d -o redis -g redis /data
  chroot "$dir" install -d -o prometheus -g prometheus /prometheus
  rm -rf "$dir"/var/cache/apt/* "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc "$dir"/usr/share/man
  dpkg-query --admindir="$dir/var/lib/dpkg" -W -f '${Package} ${Version}\n' redis-server haproxy prometheus >"$tar.versions"
  tar -C "$dir" --numeric-owner -cf "$tar.tmp" .
  mv "$tar.tmp" "$tar"
}

# The cached root filesystem is named after the suite, the packages and this
# recipe, so changing any of them builds a new one.
key=$({ echo "$suite $packages"; declare -f rootfs; } | sha256sum | cut -c1-12)
tar="$cache/debian-$suite-$key.tar"
base="mcpqueue-offline/debian:$suite-$key"
if [ "$mode" = rootfs ] || ! "$DOCKER" image inspect "$base" >/dev/null 2>&1; then
  if [ ! -s "$tar" ] || [ ! -s "$tar.versions" ]; then
    start=$SECONDS
    rootfs "$tar"
    find "$cache" -maxdepth 1 -name "debian-$suite-*.tar*" ! -name "${tar##*/}*" -delete # older recipes
    echo "images.sh: Debian $suite root filesystem, cached in $tar ($((SECONDS - start))s)"
  fi
  [ "$mode" = all ] || exit 0
  start=$SECONDS
  "$DOCKER" import "$tar" "$base" >/dev/null
  echo "images.sh: $base ($((SECONDS - start))s)"
fi
debversion() { awk -v p="$1" '$1 == p { print $2 }' "$tar.versions"; }

# service NAME PACKAGE INSTRUCTIONS: an image of one package on the base.
service() {
  local name=$1 pkg=$2
  printf 'FROM %s\nLABEL org.opencontainers.image.title="%s" org.opencontainers.image.version="%s" org.opencontainers.image.description="Debian %s package %s, for deploy/compose.offline.yml"\n%s\n' \
    "$base" "$name" "$(debversion "$pkg")" "$suite" "$pkg" "$3" >"$work/Dockerfile.$name"
  mkdir -p "$work/empty"
  build "mcpqueue-offline/$name:local" -f "$work/Dockerfile.$name" "$work/empty"
}
service redis redis-server 'USER redis
WORKDIR /data
CMD ["redis-server"]'
service haproxy haproxy 'USER haproxy
CMD ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]'
service prometheus prometheus 'USER prometheus
WORKDIR /prometheus
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]'

# Rebuilt images leave their predecessors untagged, and a new recipe an old base.
"$DOCKER" image ls mcpqueue-offline/debian --format '{{.Repository}}:{{.Tag}}' | { grep -vx "$base" || true; } | xargs -r "$DOCKER" rmi >/dev/null
"$DOCKER" image prune -f --filter "label=$mark" >/dev/null
