#!/usr/bin/env python3
"""Cost of Protocol C's release tally (authenticated realness) on ADULT, against a reference tree.

    python3 bench/release_tally.py --reference DIR [--repeats 3] [--counters elgamal paillier]
                                   [--split horizontal vertical] [--json OUT.json]

DIR holds a `fedanon/` package without the tally (e.g. `git archive <commit> fedanon | tar -x -C DIR`).
Each run is a fresh process that imports `fedanon` from one tree and runs Protocol C on ADULT
(30,162 rows, 8 QIs, k = 5, loss metric, 3 primaries + helper, 25 % pseudotuples) over real
daemons on 127.0.0.1 (gRPC, mutual TLS). Reference and current runs alternate, so both see
the same machine load; the table gives the median of each, their ratio, and the key
holder's own time in the tally check (`release_tally_s`: its digest and the comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

RUN = r"""
import json, sys
from pathlib import Path
import fedanon
from fedanon.consortium.simulation import simulate_table
from fedanon.model.config import AnonymizationConfig
from fedanon.data.io.delimited import read_table_csv
DATA = Path(fedanon.__file__).parent / "data" / "adult"
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
columns, rows = read_table_csv(DATA / "adult.csv")
paths = {q: DATA / f"adult_hierarchy_{q}.csv" for q in QIS}
sim = simulate_table(columns, rows, paths, AnonymizationConfig(QIS, k=5, metric="loss"), sys.argv[2], 3,
                     transport="grpc", protocol="C", options={"counters": sys.argv[1]})
rec = sim.party_reports["p1"]
print(json.dumps({"elapsed_s": sum(rec["phases"].get(p, 0.0) for p in ("encrypt", "integrate", "anonymize", "decrypt")),
                  "release_tally_s": rec.get("release_tally_s"), "rows": len(sim.rows),
                  "package": str(Path(fedanon.__file__).parent)}))
"""


def one_run(tree: Path, counters: str, split: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", RUN, counters, split], env=env, capture_output=True, text=True,
                         check=True, cwd=str(tree))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", type=Path, required=True, help="a tree with the reference fedanon/ package")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--counters", nargs="+", default=["elgamal"], choices=["elgamal", "paillier"])
    ap.add_argument("--split", nargs="+", default=["horizontal"], choices=["horizontal", "vertical"])
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if not (args.reference / "fedanon" / "__init__.py").is_file():
        print(f"{args.reference}: no fedanon/ package there", file=sys.stderr)
        return 2
    load = os.getloadavg()
    print(f"# Protocol C release tally vs reference ({os.cpu_count()} cores, load average at start "
          f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f})")
    print(f"{'split':<11}{'counters':<10}{'reference s':>12}{'current s':>11}{'ratio':>7}{'tally s':>9}  runs")
    results: dict[str, Any] = {"reference": str(args.reference), "load_average_at_start": list(load), "cases": []}
    for split in args.split:
        for counters in args.counters:
            ref: list[float] = []
            cur: list[float] = []
            tally: list[float] = []
            for i in range(args.repeats):
                order = [(args.reference, ref), (ROOT, cur)] if i % 2 == 0 else [(ROOT, cur), (args.reference, ref)]
                for tree, into in order:
                    m = one_run(tree, counters, split)
                    into.append(m["elapsed_s"])
                    if tree == ROOT:
                        tally.append(float(m["release_tally_s"] or 0.0))
            r, c = statistics.median(ref), statistics.median(cur)
            print(f"{split:<11}{counters:<10}{r:>12.2f}{c:>11.2f}{c / r:>7.3f}{statistics.median(tally):>9.3f}  "
                  f"{args.repeats} each, alternating", flush=True)
            results["cases"].append({"split": split, "counters": counters, "reference_s": ref, "current_s": cur,
                                     "release_tally_s": tally, "ratio_of_medians": round(c / r, 4)})
    load = os.getloadavg()
    results["load_average_at_end"] = list(load)
    print(f"load average at end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (shared machine: timings under load)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
