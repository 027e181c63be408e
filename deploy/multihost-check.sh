#!/usr/bin/env bash
# Before a real multi-host run: prove every channel of run.toml works (certificates, allow-lists,
# addresses, firewalls) and print the round-trip time of every ordered pair of parties.
# Usage: deploy/multihost-check.sh run.toml      (run at the coordinator; daemons already serving)
set -euo pipefail
RUN=${1:?usage: $0 run.toml}
PY=${PYTHON:-python3}
REPORT=$(mktemp -t fedanon-check-XXXX.json)
trap 'rm -f "$REPORT" "$REPORT.csv"' EXIT
$PY -m fedanon run --config "$RUN" --protocol check --no-progress --report "$REPORT" --output "$REPORT.csv"
$PY - "$REPORT" <<'PYEOF'
import json, sys
report = json.load(open(sys.argv[1]))
print(f"run {report['run_id']}: all {len(report['party_reports'])} parties reached each other")
for party, rep in sorted(report["party_reports"].items()):
    for peer, ms in sorted(rep.get("rtt_ms", {}).items()):
        print(f"  {party:>16} -> {peer:<16} {ms:8.2f} ms")
PYEOF
