#!/usr/bin/env bash
# Build the fedanon image with no image registry: a Debian root file system from Debian packages
# (mmdebstrap), imported as the base image, then deploy/Dockerfile on it with the Python packages
# installed from a wheelhouse made on this host (the build itself needs no network).
# Usage: deploy/build-image.sh [--rebuild-base]     (as root, or rootless podman with subuids)
# Env: IMAGE (localhost/fedanon:latest), BASE_IMAGE (localhost/fedanon-base:SUITE), SUITE (bookworm:
#      its python3 is 3.11), MIRROR (http://deb.debian.org/debian), WORK (build/container: the root
#      file system tarball and the wheelhouse), PYTHON (python3, whose pip builds the wheelhouse).
# Needs: mmdebstrap, podman (runc or crun), pip on the host reaching a package index.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=podman/env.sh
. deploy/podman/env.sh
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
IMAGE=${IMAGE:-localhost/fedanon:latest}
BASE_IMAGE=${BASE_IMAGE:-localhost/fedanon-base:$SUITE}
WORK=${WORK:-build/container}
PY=${PYTHON:-python3}
REBUILD=0; [ "${1:-}" = "--rebuild-base" ] && REBUILD=1
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
declare -a TIMES=()
step() { local t0=$SECONDS; "$@"; TIMES+=("$(printf '%-28s %5d s' "$STEP" $((SECONDS - t0)))"); }

# 1. root file system: minbase + python3 and its venv module; no docs, man pages or locales
rootfs() {
  if [ "$REBUILD" = 1 ] || [ ! -s "$WORK/rootfs-$SUITE.tar" ]; then
    mmdebstrap --variant=minbase --format=tar --include=python3,python3-venv,ca-certificates \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
      "$SUITE" "$WORK/rootfs-$SUITE.tar.tmp" "$MIRROR"
    mv "$WORK/rootfs-$SUITE.tar.tmp" "$WORK/rootfs-$SUITE.tar"
  else
    echo "root file system: reusing $WORK/rootfs-$SUITE.tar (--rebuild-base to make it again)"
  fi
}
STEP="root file system (mmdebstrap)"; step rootfs

# 2. the base image
STEP="import base image"
step podman import --change 'CMD ["/bin/bash"]' --message "Debian $SUITE minbase + python3" \
  "$WORK/rootfs-$SUITE.tar" "$BASE_IMAGE"
podman_settle "$BASE_IMAGE"

# 3. wheelhouse: fedanon, its dependencies and its build backend, made with the host's pip
wheels() {
  rm -rf "$WORK/wheels" && mkdir -p "$WORK/wheels"
  "$PY" -m pip wheel --quiet --wheel-dir "$WORK/wheels" . "setuptools>=68" wheel
}
STEP="wheelhouse (pip wheel)"; step wheels

# 4. the image: deploy/Dockerfile on the local base, pip offline from the mounted wheelhouse
STEP="image (podman build)"
step podman build --format docker --network none -v "$WORK/wheels:/wheels:ro" \
  --build-arg BASE="$BASE_IMAGE" --build-arg PIP_OPTIONS="--no-index --find-links /wheels" \
  -f deploy/Dockerfile -t "$IMAGE" .

podman run --rm --health-cmd none "$IMAGE" --version
printf '%s\n' "${TIMES[@]}"
podman image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -F -e "$IMAGE" -e "$BASE_IMAGE"
echo "built $IMAGE on $BASE_IMAGE${CONTAINERS_CONF:+ (CONTAINERS_CONF=$CONTAINERS_CONF)}"
