# Sourced by deploy/build-image.sh and deploy/container-consortium.sh: make `podman` usable here.
# podman_settle IMAGE: if a plain `podman run` of IMAGE fails and CONTAINERS_CONF is not set, retry
# with restricted-host.conf (runc, limits under the host's) and keep it exported when that works;
# otherwise print podman's own error and fail, so the caller stops at the step that is impossible.
PODMAN_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
podman_settle() {
  local image=$1 err
  if err=$(podman run --rm --network none --entrypoint /bin/true "$image" 2>&1); then return 0; fi
  if [ -z "${CONTAINERS_CONF:-}" ]; then
    echo "podman run failed with the default settings: $err" >&2
    export CONTAINERS_CONF="$PODMAN_HERE/restricted-host.conf"
    if err=$(podman run --rm --network none --entrypoint /bin/true "$image" 2>&1); then
      echo "using CONTAINERS_CONF=$CONTAINERS_CONF" >&2; return 0
    fi
  fi
  echo "podman cannot run a container here (CONTAINERS_CONF=${CONTAINERS_CONF:-unset}): $err" >&2
  return 1
}
