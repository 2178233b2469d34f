#!/usr/bin/env bash
# Build the CPU training image (docker/cpu/Dockerfile) with whatever this machine has: docker (buildx), or
# buildah without a daemon. The base comes from a registry when one is reachable; else, with buildah, a local
# stand-in is made with debootstrap (Debian bookworm minbase, Python 3.11 in a venv) under the Dockerfile's
# FROM name, and the script says so. Usage (from anywhere; see docker/README.md):
#   docker/build.sh [--tag NAME] [--torch-index URL|DIR] [--engine docker|buildah] [--local-base]
# --torch-index: an index URL (the Dockerfile's default: PyTorch's CPU index), or a folder holding the torch CPU
#   wheel (served to the build as a PEP 503 index on loopback). Without it, a folder in pip's own `find-links`
#   that holds the wheel is used. pip inside the build trusts the certificate bundle pip trusts here (PIP_CERT,
#   or pip's `cert` setting), passed as the build secret `cacert`: mounted per RUN, never stored in the image.
set -euo pipefail
cd "$(dirname "$0")/.."
dockerfile=docker/cpu/Dockerfile
version=$(sed -n 's/.*org.opencontainers.image.version="\([^"]*\)".*/\1/p' "$dockerfile")
tag=${REGISTRY:+$REGISTRY/}workshop-cpu:$version
torch_index=${TORCH_INDEX:-} engine=${ENGINE:-} local_base=0 old_base=
base=$(sed -n 's/^FROM \([^ ]*\).*/\1/p' "$dockerfile" | head -n1)
torch_version=$(sed -n 's/^ARG TORCH_VERSION=//p' "$dockerfile")
die() { echo "docker/build.sh: $*" >&2; exit 2; }
say() { echo "== $*"; }

while [ $# -gt 0 ]; do
  case $1 in
    --tag) tag=$2; shift 2 ;;
    --torch-index) torch_index=$2; shift 2 ;;
    --engine) engine=$2; shift 2 ;;
    --local-base) local_base=1; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) die "unknown argument '$1'; allowed: --tag, --torch-index, --engine, --local-base" ;;
  esac
done

if [ -z "$engine" ]; then
  if command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; then engine=docker
  elif command -v buildah >/dev/null && command -v podman >/dev/null; then engine=buildah
  else die "no engine: need a running docker daemon, or buildah + podman (apt-get install buildah podman runc)"; fi
fi
case $engine in docker|buildah) ;; *) die "engine '$engine'; allowed: docker, buildah" ;; esac
say "engine: $engine; image: $tag; base: $base"

# --- the base image: present, pulled, or (buildah only) made locally with debootstrap ---
has_image() { if [ "$engine" = docker ]; then docker image inspect "$1" >/dev/null 2>&1; else podman image exists "$1"; fi; }
make_local_base() {
  command -v debootstrap >/dev/null || die "no registry reachable and no debootstrap to make a local base (apt-get install debootstrap)"
  local root mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
  root=$(mktemp -d "${TMPDIR:-/var/tmp}/workshop-base.XXXXXX") && chmod 755 "$root"   # it becomes the image's /
  old_base=$(podman image inspect --format '{{.Id}}' "$base" 2>/dev/null || true)
  say "no registry reachable: making a LOCAL base for $base with debootstrap (bookworm minbase, $mirror)"
  local packages=python3.11,python3.11-venv,libpython3.11-dev,python3-distutils,python3-setuptools-whl,ca-certificates
  debootstrap --variant=minbase --include="$packages" bookworm "$root" "$mirror" > "$root.log" 2>&1 \
    || { tail -n 20 "$root.log"; die "debootstrap failed (log: $root.log)"; }
  chroot "$root" /usr/bin/python3.11 -m venv /opt/venv
  say "local base: $(chroot "$root" /opt/venv/bin/python --version), $(chroot "$root" /opt/venv/bin/pip --version | cut -d' ' -f1-2)"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/root/.cache
  tar -C "$root" -c . | podman import \
    --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
    --message "local stand-in for $base: debootstrap bookworm minbase + python3.11 venv" - "$base" >/dev/null
  rm -rf "$root" "$root.log"
}
if has_image "$base" && [ "$local_base" = 0 ]; then
  say "base $base is already in local storage"
elif [ "$local_base" = 0 ] && { if [ "$engine" = docker ]; then timeout 120 docker pull -q "$base"
       else timeout 120 podman pull -q --retry 0 "$base"; fi; } >/dev/null 2>&1; then
  say "base $base pulled from its registry"
elif [ "$engine" = buildah ]; then
  make_local_base
else
  die "cannot pull $base and docker cannot use a debootstrap base here; use --engine buildah"
fi

# --- the torch index: a URL as given, or a folder of wheels served as a PEP 503 index on loopback ---
build_args=() tmp=$(mktemp -d) server=
cleanup() { [ -z "$server" ] || kill "$server" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
if [ -z "$torch_index" ]; then
  for dir in $(pip config get global.find-links 2>/dev/null || true) ${PIP_FIND_LINKS:-}; do
    if compgen -G "$dir/torch-$torch_version+cpu-*.whl" >/dev/null; then torch_index=$dir; break; fi
  done
  [ -z "$torch_index" ] || say "torch $torch_version+cpu from pip's find-links: $torch_index"
fi
if [ -n "$torch_index" ] && [ -d "$torch_index" ]; then
  # torch and its own dependencies (at the image's pins), one folder per project: http.server's listing of a
  # folder is a PEP 503 project page.
  pip download -q --no-cache-dir --only-binary=:all: -d "$tmp/wheels" --find-links "$torch_index" \
    -c docker/requirements.txt "torch==$torch_version+cpu" 2> >(grep -v 'is ignored: it is neither' >&2)
  for whl in "$tmp"/wheels/*.whl; do
    project=$(basename "$whl" | cut -d- -f1 | tr 'A-Z_.' 'a-z--')
    mkdir -p "$tmp/simple/$project" && mv "$whl" "$tmp/simple/$project/"
  done
  # one fixed port when free: TORCH_INDEX is a build argument, so a new URL would rebuild every layer after it
  port=$(python3 -c 'import socket
for port in (38765, 0):
    try:
        s = socket.socket(); s.bind(("127.0.0.1", port)); print(s.getsockname()[1]); break
    except OSError: pass')
  python3 -m http.server --bind 127.0.0.1 --directory "$tmp/simple" "$port" >/dev/null 2>&1 & server=$!
  torch_index=http://127.0.0.1:$port/
fi
[ -z "$torch_index" ] || build_args+=(--build-arg "TORCH_INDEX=$torch_index")

cert=${PIP_CERT:-$(pip config get global.cert 2>/dev/null || true)}
[ -z "$cert" ] || { [ -f "$cert" ] && build_args+=(--secret "id=cacert,src=$cert") && say "pip in the build trusts $cert"; }

# --- the build ---
digest=$(find pyproject.toml README.md workshop -type f -not -path '*/__pycache__/*' | LC_ALL=C sort \
  | xargs sha256sum | sha256sum | cut -c1-16)
build_args+=(--build-arg "SOURCE_DIGEST=$digest")
start=$SECONDS
if [ "$engine" = docker ]; then
  DOCKER_BUILDKIT=1 docker build --network host "${build_args[@]}" -f "$dockerfile" -t "$tag" .
else
  # chroot isolation: no OCI runtime or cgroups needed to build (crun fails on hybrid cgroup hosts);
  # --pull=never: the base is the one above, pulled or local.
  buildah bud --isolation chroot --network host --pull=never --layers \
    --ignorefile "$dockerfile.dockerignore" "${build_args[@]}" -f "$dockerfile" -t "$tag" .
  # the intermediate images this build left untagged (they carry the image's title label), and a replaced base
  podman image prune -f --filter label=org.opencontainers.image.title=workshop-cpu >/dev/null
  [ -z "${old_base:-}" ] || podman rmi "$old_base" >/dev/null 2>&1 || true
fi
say "built $tag in $((SECONDS - start)) s; its layers:"
if [ "$engine" = docker ]; then docker history --no-trunc --format '{{.Size}}\t{{.CreatedBy}}' "$tag"
else podman history --no-trunc --format '{{.Size}}\t{{.CreatedBy}}' "$tag"; fi | cut -c1-150
