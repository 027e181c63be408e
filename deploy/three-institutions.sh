#!/usr/bin/env bash
# Set up three institutions by hand on one machine (clinic-a and clinic-b hold data, trust-center
# is the helper), exactly as docs/deployment/by-hand.md describes, then run the connectivity check and Protocol B.
# Usage: deploy/three-institutions.sh [WORKDIR]   (default: a fresh temp dir; needs `fedanon` importable)
set -euo pipefail
W=${1:-$(mktemp -d -t fedanon-3inst-XXXX)}
PY=${PYTHON:-python3}
FED="$PY -m fedanon"
DATA=$($PY -c 'import fedanon, pathlib; print(pathlib.Path(fedanon.__file__).parent / "data" / "adult")')
mkdir -p "$W" && cd "$W"
echo "workdir: $W"

# 1. one run CA (held by whoever organizes the consortium), one certificate per party and coordinator
$FED certs init --dir ca --force
for p in clinic-a clinic-b trust-center; do $FED certs issue $p --dir ca --host 127.0.0.1 --force; done
$FED certs issue steward --dir ca --force

# 2. each clinic's own data: ADULT split by rows (header + disjoint halves)
head -n 1 "$DATA/adult.csv" > clinic-a.csv; cp clinic-a.csv clinic-b.csv
tail -n +2 "$DATA/adult.csv" | awk 'NR % 2 == 1' >> clinic-a.csv
tail -n +2 "$DATA/adult.csv" | awk 'NR % 2 == 0' >> clinic-b.csv

# 3. one party config per institution: identity, listen address, TLS files, whom it trusts, its data
read -r PA PB PT <<< "${FEDANON_PORTS:-50061 50062 50063}"   # override to avoid clashes
port() { case $1 in clinic-a) echo $PA;; clinic-b) echo $PB;; trust-center) echo $PT;; esac; }
for p in clinic-a clinic-b trust-center; do
  {
    echo "[party]"; echo "name = \"$p\""; echo "listen = \"127.0.0.1:$(port $p)\""; echo 'coordinators = ["steward"]'
    echo "[tls]"; echo "cert = \"ca/$p.crt\""; echo "key = \"ca/$p.key\""; echo 'ca = "ca/ca.crt"'
    echo "[peers]"
    for q in clinic-a clinic-b trust-center; do [ $q = $p ] || echo "$q = \"127.0.0.1:$(port $q)\""; done
    if [ $p != trust-center ]; then
      echo "[data]"; echo "csv = \"$p.csv\""; echo 'delimiter = ";"'
      echo "[data.quasi_identifiers]"
      for a in age education marital-status native-country occupation race sex workclass; do
        echo "$a = \"$DATA/adult_hierarchy_$a.csv\""
      done
      echo "[data.sensitive]"; echo "salary-class = \"$DATA/adult_hierarchy_salary-class.csv\""
    fi
  } > $p.toml
done

# 4. serve (each institution on its own host in reality; here background processes)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done; wait || true; }
trap cleanup EXIT
for p in clinic-a clinic-b trust-center; do
  $FED party serve --config $p.toml --ready-file $p.ready 2> $p.log & PIDS+=($!)
done
for p in clinic-a clinic-b trust-center; do
  for _ in $(seq 100); do [ -f $p.ready ] && break; sleep 0.1; done
  [ -f $p.ready ] || { echo "$p did not start:"; cat $p.log; exit 1; }
done

# 5. the coordinator's run config and the runs
cat > run.toml <<TOML
[run]
protocol = "B"
distribution = "horizontal"
result_recipient = "clinic-a"
output = "result.csv"
report = "report.json"

[coordinator]
name = "steward"
cert = "ca/steward.crt"
key = "ca/steward.key"
ca = "ca/ca.crt"

[parties.clinic-a]
address = "127.0.0.1:$PA"
role = "primary"
[parties.clinic-b]
address = "127.0.0.1:$PB"
role = "primary"
[parties.trust-center]
address = "127.0.0.1:$PT"
role = "helper"

[privacy]
quasi_identifiers = ["age", "education", "marital-status", "native-country", "occupation", "race", "sex", "workclass"]
k = 5
suppression = 0.0
metric = "nonuniform-entropy"
TOML
$FED run --config run.toml --protocol check --output check.csv --report check.json --no-progress
$FED run --config run.toml --no-progress
echo "result: $(($(wc -l < result.csv) - 1)) rows in $W/result.csv, report in $W/report.json"
