#!/usr/bin/env bash
# ADULT over 3 primaries (+ helper) and a coordinator, each in its own network namespace on a
# bridge, optionally with every link shaped; compares the result with the centralized engine.
# Usage: deploy/netns-consortium.sh [--protocol A|B|C] [--split horizontal|vertical] [--rate RATE] OUTDIR
#        deploy/netns-consortium.sh --layout LAYOUT.toml [--protocol A|B|C] [--rate RATE] OUTDIR  (hybrid)
#        (root; see deploy/consortium.py --help for all options). Last line "OK ..." on success.
# Python: $PYTHON, else the repository's .venv, else python3 (needs fedanon and tomli_w importable).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$HERE/../.venv/bin/python" ]; then PYTHON="$HERE/../.venv/bin/python"; else PYTHON=python3; fi
fi
exec "$PYTHON" "$HERE/consortium.py" "$@"
