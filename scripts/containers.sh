#!/usr/bin/env bash
# Build the project's container images without any image registry: a Debian base made from
# Debian's own packages (mmdebstrap), then on it
#   scheduler-worker     the product (worker, CLI, PySpark executors): docker/Dockerfile
#   scheduler-kafka      Kafka, from the Maven Central jars the launcher fetches
#   scheduler-cassandra  Cassandra, likewise                          (both docker/server.Dockerfile)
# Each image is tagged with a hash of everything it is built from, and also `:local`; an image
# whose tag exists is not built again, so a second run builds nothing.
#
# On a machine of the CI kind (Debian, root, no engine running) it also installs docker.io and
# mmdebstrap and starts dockerd in the background. Where an engine already runs it is used as is.
#
#   bash scripts/containers.sh              # engine + every image
#   bash scripts/containers.sh --engine     # only make sure an engine answers
#   SCHEDULER_IMAGE_BASE=debian:bookworm-slim bash scripts/containers.sh   # with a registry
#
# Prints `name=image:tag` lines on stdout (the rest goes to stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

say() { echo "containers: $*" >&2; }

# --- the engine -----------------------------------------------------------------------------
engine_answers() { docker info >/dev/null 2>&1; }

start_engine() {
  if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1 \
    || ! command -v mmdebstrap >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
      say "no Docker engine answers and this is not a Debian root shell: install Docker" \
        "(https://docs.docker.com/engine/install/) and start it, then run this again"
      exit 1
    fi
    say "installing docker.io, mmdebstrap and docker-compose from Debian"
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io mmdebstrap docker-compose >&2
  fi
  engine_answers && return 0
  if [ "$(id -u)" != 0 ]; then
    say "the Docker engine does not answer (docker info); start it (e.g. systemctl start docker)"
    exit 1
  fi
  # Host networking only: no bridge, no iptables/NAT rules, so nothing but loopback traffic.
  local log=/var/log/scheduler-dockerd.log
  say "starting dockerd in the background (log: $log)"
  setsid nohup dockerd --bridge=none --iptables=false --ip-masq=false >"$log" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    engine_answers && return 0
    sleep 1
  done
  say "dockerd did not answer within 60 s; last lines of $log:"
  tail -20 "$log" >&2
  exit 1
}

start_engine
[ "${1:-}" = "--engine" ] && exit 0

# --- content hashes -------------------------------------------------------------------------
# sha256 over the names and contents of files (and any extra strings), first 16 hex digits.
content_hash() {
  {
    for extra in "${extras[@]}"; do echo "$extra"; done
    (cd "$1" && find . -type f ! -name '*.pyc' ! -name '*.so' ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z \
      | xargs -0 sha256sum)
  } | sha256sum | cut -c1-16
}

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

build() { # name tag context dockerfile build-args...
  local name=$1 tag=$2 context=$3 dockerfile=$4
  shift 4
  if have_image "$name:$tag"; then
    say "$name:$tag is built already"
  else
    say "building $name:$tag"
    local started=$SECONDS
    # The legacy builder: Debian's engine has no buildx, and it honours --network host.
    if ! DOCKER_BUILDKIT=0 docker build --network host --force-rm -f "$dockerfile" -t "$name:$tag" "$@" \
      "$context" >"$build_log" 2>&1; then
      say "building $name failed; last lines of $build_log:"
      tail -40 "$build_log" >&2
      exit 1
    fi
    say "built $name:$tag in $((SECONDS - started)) s"
  fi
  docker tag "$name:$tag" "$name:local"
  echo "$name=$name:$tag"
}

# --- the base -------------------------------------------------------------------------------
base=${SCHEDULER_IMAGE_BASE:-}
if [ -z "$base" ]; then
  # Debian's own mirror and release, as this machine's apt uses them.
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  mirror=${SCHEDULER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
  tag="$suite-$(echo "minbase $suite $mirror" | sha256sum | cut -c1-12)"
  if have_image "scheduler-base:$tag"; then
    say "scheduler-base:$tag is built already"
  else
    say "building scheduler-base:$tag with mmdebstrap ($suite from $mirror)"
    started=$SECONDS
    mmdebstrap --quiet --variant=minbase "$suite" - "$mirror" \
      | docker import - "scheduler-base:$tag" >/dev/null
    say "built scheduler-base:$tag in $((SECONDS - started)) s"
  fi
  docker tag "scheduler-base:$tag" scheduler-base:local
  echo "base=scheduler-base:$tag"
  base="scheduler-base:$tag"
fi
base_id=$(docker image inspect -f '{{.Id}}' "$base" 2>/dev/null || echo "$base")

# --- the product ----------------------------------------------------------------------------
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
build_log=${SCHEDULER_IMAGE_BUILD_LOG:-/tmp/scheduler-image-build.log}
# CAs the host trusts beyond Debian's (a proxy that re-signs TLS): pip in the build needs them.
extra_ca=""
if [ -n "${SCHEDULER_IMAGE_CA_CERTS:-}" ]; then
  extra_ca=$(cat "$SCHEDULER_IMAGE_CA_CERTS")
elif compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  extra_ca=$(cat /usr/local/share/ca-certificates/*.crt)
fi
mkdir -p "$stage/worker"
cp pyproject.toml README.md docker/Dockerfile "$stage/worker/"
cp -r scheduler "$stage/worker/scheduler"
extras=("$base_id" "$extra_ca")
build scheduler-worker "$(content_hash "$stage/worker")" "$root" docker/Dockerfile \
  --build-arg "BASE=$base" --build-arg "EXTRA_CA_CERTS=$extra_ca"

# --- the servers ----------------------------------------------------------------------------
# The jars come from the launcher's own Maven resolution (cached under .services/cache), the
# configuration and command line from its Server classes, run inside the image by
# `python3 -m scheduler.services.container`.
for server in kafka cassandra; do
  dir="$stage/$server"
  mkdir -p "$dir/scheduler"
  lib=$(.venv/bin/python -m scheduler.services.container --resolve "$server")
  cp -r "$lib" "$dir/jars"
  cp scheduler/__init__.py "$dir/scheduler/"
  cp -r scheduler/services "$dir/scheduler/services"
  cp docker/server.Dockerfile "$dir/Dockerfile"
  extras=("$base_id")
  build "scheduler-$server" "$(content_hash "$dir")" "$dir" "$dir/Dockerfile" \
    --build-arg "BASE=$base" --build-arg "SERVER=$server"
done
