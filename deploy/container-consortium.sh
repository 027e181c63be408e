#!/usr/bin/env bash
# Run deploy/compose.yaml's consortium from the image with plain podman (no compose needed): the
# files of compose-init.sh (run CA, certificates with SAN = service name, party.toml per service,
# ADULT split over three clinics), one container per service with compose.yaml's settings (read-only,
# all capabilities dropped, no-new-privileges, 1 GiB /dev/shm, the image's user), peers reached by
# service name on a podman network, ports published on 127.0.0.1 only. Then the image's health
# check in each container, the connectivity check and Protocol B from the coordinator on the host,
# and `fedanon anonymize` of the pooled table in a container from the same image: the two results
# must hold the same rows. Everything it started is removed at the end, also on failure.
# Usage: deploy/container-consortium.sh [WORKDIR]   (default: a fresh temp dir; last line "OK ..." on success)
# Env: IMAGE (localhost/fedanon:latest, from deploy/build-image.sh), FEDANON_PORT_BASE (50061: the
#      four host ports from there), PYTHON (python3, with fedanon importable: certificates, coordinator).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=podman/env.sh
. "$ROOT/deploy/podman/env.sh"
IMAGE=${IMAGE:-localhost/fedanon:latest}
PY=${PYTHON:-python3}
PORT0=${FEDANON_PORT_BASE:-50061}
W=${1:-$(mktemp -d -t fedanon-containers-XXXX)}
mkdir -p "$W" && W=$(cd "$W" && pwd)
SERVICES=(clinic-a clinic-b clinic-c trust-center)
TAG=fa$$
NET=fedanon-$TAG
echo "workdir: $W"

podman image exists "$IMAGE" || { echo "no image $IMAGE: build it with deploy/build-image.sh" >&2; exit 1; }
podman_settle "$IMAGE"

cleanup() {
  for s in "${SERVICES[@]}"; do podman rm -f -t 5 "$TAG-$s" >/dev/null 2>&1 || true; done
  podman network rm -f "$NET" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# 1. the files compose.yaml mounts, and the coordinator's run.toml on this port range
"$ROOT/deploy/compose-init.sh" "$W/compose" >/dev/null
for i in "${!SERVICES[@]}"; do
  sed -i "s/127.0.0.1:$((50061 + i))\"/127.0.0.1:$((PORT0 + i))\"/" "$W/compose/run.toml"
done

# 2. a network on which the services find each other by name (fixed addresses + host entries, which
#    needs no DNS plugin), then one container per service as compose.yaml describes it
SUBNET=10.89.$(( $$ % 200 + 20 ))
podman network create --subnet "$SUBNET.0/24" "$NET" >/dev/null
HOSTS=()
for i in "${!SERVICES[@]}"; do HOSTS+=(--add-host "${SERVICES[$i]}:$SUBNET.$((11 + i))"); done
USER_OPTS=(--user 10001:10001)
[ "$(id -u)" = 0 ] || USER_OPTS=(--userns keep-id --user "$(id -u):$(id -g)")
for i in "${!SERVICES[@]}"; do
  s=${SERVICES[$i]}
  podman run -d --name "$TAG-$s" --network "$NET" --ip "$SUBNET.$((11 + i))" "${HOSTS[@]}" \
    -p "127.0.0.1:$((PORT0 + i)):50051" -v "$W/compose/$s:/etc/fedanon:ro" "${USER_OPTS[@]}" \
    --read-only --tmpfs /tmp --shm-size 1g --cap-drop ALL --security-opt no-new-privileges \
    --health-interval disable "$IMAGE" >/dev/null 2>"$W/podman-run-$s.err" \
    || { cat "$W/podman-run-$s.err" >&2; exit 1; }
done

# 3. healthy = the image's HEALTHCHECK passes (the daemon answers Ping over mutual TLS)
for s in "${SERVICES[@]}"; do
  ok=0
  for _ in $(seq 60); do
    if podman healthcheck run "$TAG-$s" >/dev/null 2>&1; then ok=1; break; fi
    sleep 1
  done
  [ $ok = 1 ] || { echo "$s is not healthy:" >&2; podman logs "$TAG-$s" 2>&1 | tail -20 >&2; exit 1; }
  echo "$s: healthy"
done

# 4. the coordinator, on the host like compose's: the connectivity check, then Protocol B
cd "$W/compose"
$PY -m fedanon run --config run.toml --protocol check --output check.csv --report check.json --no-progress
$PY -m fedanon run --config run.toml --no-progress

# 5. the pooled table anonymized centrally, by the same image (no network), with run.toml's model
mkdir -p "$W/central"
cat clinic-a/data/clinic-a.csv > "$W/central/pooled.csv"
for s in clinic-b clinic-c; do tail -n +2 "$s/data/$s.csv" >> "$W/central/pooled.csv"; done
cp clinic-a/data/adult_hierarchy_*.csv "$W/central/"
[ "$(id -u)" = 0 ] && chown -R 10001:10001 "$W/central"
QI_ARGS=()
for a in age education marital-status native-country occupation race sex workclass; do
  QI_ARGS+=(--qi "$a=/w/adult_hierarchy_$a.csv")
done
podman run --rm --network none "${USER_OPTS[@]}" --health-cmd none -v "$W/central:/w" "$IMAGE" anonymize \
  /w/pooled.csv --delimiter ';' "${QI_ARGS[@]}" --insensitive salary-class --k 5 --suppression 0.02 \
  --metric loss --output /w/central.csv --report /w/central.json --quiet 2>"$W/central/podman.err" \
  || { cat "$W/central/podman.err" >&2; exit 1; }

# 6. the same rows (as a multiset, columns by name: row and column order follow the parties)
$PY - result.csv "$W/central/central.csv" <<'PYEOF'
import csv, sys
def table(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f, delimiter=";"))
    return rows[0], rows[1:]
(dh, drows), (ch, crows) = table(sys.argv[1]), table(sys.argv[2])
if sorted(dh) != sorted(ch):
    sys.exit(f"columns differ: distributed {dh}, central {ch}")
order = [ch.index(c) for c in dh]
central = sorted(tuple(r[i] for i in order) for r in crows)
distributed = sorted(map(tuple, drows))
if central != distributed:
    extra = len(set(distributed) - set(central)); missing = len(set(central) - set(distributed))
    sys.exit(f"Protocol B from the containers differs from the central anonymization: "
             f"{len(distributed)} vs {len(central)} rows, {extra} row values only distributed, {missing} only central")
PYEOF
echo "OK Protocol B over ${#SERVICES[@]} containers of $IMAGE equals the central anonymization ($(($(wc -l < result.csv) - 1)) rows, $W)"
