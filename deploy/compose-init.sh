#!/usr/bin/env bash
# Prepare the directory deploy/compose.yaml mounts: a run CA, one certificate per service (SAN =
# its compose service name, which is how the containers dial each other) and for the coordinator,
# one party.toml per service (listen 0.0.0.0:50051 inside the container; every path relative to
# the file, so the same file works at /etc/fedanon in the container and on the host for
# `fedanon party check-config`), ADULT split by rows over the three clinics, and the
# coordinator's run.toml (Protocol B, horizontal, parties at FEDANON_BIND:5006x).
# Usage: deploy/compose-init.sh DIR      (e.g. deploy/compose; needs `fedanon` importable)
# Env: FEDANON_UID/FEDANON_GID (default 10001) own the keys when run as root; FEDANON_BIND as in compose.yaml.
set -euo pipefail
DIR=${1:?usage: $0 DIR}
PY=${PYTHON:-python3}
FED="$PY -m fedanon"
UID_=${FEDANON_UID:-10001}; GID_=${FEDANON_GID:-10001}; BIND=${FEDANON_BIND:-127.0.0.1}
DATA=$($PY -c 'import fedanon, pathlib; print(pathlib.Path(fedanon.__file__).parent / "data" / "adult")')
CLINICS=(clinic-a clinic-b clinic-c); HELPER=trust-center; ALL=("${CLINICS[@]}" "$HELPER")
QIS=(age education marital-status native-country occupation race sex workclass)
mkdir -p "$DIR" && cd "$DIR"
umask 077

# 1. run CA and certificates (the CA key stays here, outside every mounted directory)
$FED certs init --dir ca --force >/dev/null
for p in "${ALL[@]}"; do $FED certs issue "$p" --dir ca --host "$p" --force >/dev/null; done
$FED certs issue steward --dir ca --force >/dev/null

# 2. one directory per service: its own certificate and key, the CA certificate, party.toml, data
for i in "${!ALL[@]}"; do
  p=${ALL[$i]}
  mkdir -p "$p"
  cp "ca/$p.crt" ca/ca.crt "$p/"
  install -m 0400 "ca/$p.key" "$p/$p.key"
  {
    echo "[party]"; echo "name = \"$p\""; echo 'listen = "0.0.0.0:50051"'; echo 'coordinators = ["steward"]'
    echo "[tls]"; echo "cert = \"$p.crt\""; echo "key = \"$p.key\""; echo 'ca = "ca.crt"'
    echo "[peers]"
    for q in "${ALL[@]}"; do [ "$q" = "$p" ] || echo "$q = \"$q:50051\""; done
  } > "$p/party.toml"
done
for i in "${!CLINICS[@]}"; do
  p=${CLINICS[$i]}
  mkdir -p "$p/data"
  head -n 1 "$DATA/adult.csv" > "$p/data/$p.csv"
  tail -n +2 "$DATA/adult.csv" | awk -v n=${#CLINICS[@]} -v r="$i" 'NR % n == r' >> "$p/data/$p.csv"
  for a in "${QIS[@]}" salary-class; do cp "$DATA/adult_hierarchy_$a.csv" "$p/data/"; done
  {
    echo "[data]"; echo "csv = \"data/$p.csv\""; echo 'delimiter = ";"'
    echo "[data.quasi_identifiers]"
    for a in "${QIS[@]}"; do echo "$a = \"data/adult_hierarchy_$a.csv\""; done
    echo "[data.sensitive]"; echo "salary-class = \"data/adult_hierarchy_salary-class.csv\""
  } >> "$p/party.toml"
done
chmod -R go+rX "${ALL[@]}"   # configs, certificates and data readable; keys stay 0400
for p in "${ALL[@]}"; do chmod 0400 "$p/$p.key"; done
if [ "$(id -u)" = 0 ]; then
  for p in "${ALL[@]}"; do chown "$UID_:$GID_" "$p/$p.key"; done
else
  echo "note: not root, so the keys belong to $(id -u); start compose with FEDANON_UID=$(id -u) FEDANON_GID=$(id -g)" >&2
fi

# 3. the coordinator's run config (on the container host; ports as published by compose.yaml)
{
  echo "[run]"; echo 'protocol = "B"'; echo 'distribution = "horizontal"'; echo 'result_recipient = "clinic-a"'
  echo 'output = "result.csv"'; echo 'report = "report.json"'
  echo "[coordinator]"; echo 'name = "steward"'
  echo 'cert = "ca/steward.crt"'; echo 'key = "ca/steward.key"'; echo 'ca = "ca/ca.crt"'
  port=50061
  for p in "${ALL[@]}"; do
    role=primary; [ "$p" = "$HELPER" ] && role=helper
    echo "[parties.$p]"; echo "address = \"$BIND:$port\""; echo "role = \"$role\""
    port=$((port + 1))
  done
  echo "[privacy]"
  printf 'quasi_identifiers = [%s]\n' "$(printf '"%s", ' "${QIS[@]}" | sed 's/, $//')"
  echo 'k = 5'; echo 'suppression = 0.02'; echo 'metric = "loss"'
} > run.toml
echo "prepared $(pwd): ${ALL[*]} (+ steward); next: docker compose -f deploy/compose.yaml up -d --build"
