#!/usr/bin/env python3
"""DP statistics across institutions: ADULT's counts and marginals by Protocols A, B and C next to the local release.

    python3 bench/dp_stats.py [--epsilon 1] [--parties 3] [--transport grpc|memory] [--json OUT.json]

ADULT (30,162 rows); the total row count plus four marginals (sex × race, age at level 1,
education, workclass × salary-class): 5 queries, the cells of every hierarchy level. Reference
in the same run: `fedanon stats`'s release of the pooled table (`dp.marginals.release_statistics`,
OpenDP noise; median of three, the first of which loads OpenDP). Then the statistics mode of A, B and C over `--parties` primaries, horizontally
and vertically, by default every party a daemon on loopback (gRPC over mutual TLS, as
`fedanon simulate` runs them; start-up of the daemons included). Vertically `fedanon simulate`'s
deal applies: B and C (A from three primaries on) get one attribute per party, so that sex × race and workclass × salary-class
cross two parties' columns and are counted on a join (B, C: the helper's; A: round its ring of primaries,
with three primaries or more).
Each row: wall time and its
ratio to the local release, the key holder's encrypt and decrypt phases (Paillier key
generation, encryption of the packed counts, decryption of the sums), and the largest absolute
difference between a released cell and the exact count (the noise, for scale).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fedanon.consortium.statistics import simulate_statistics  # noqa: E402
from fedanon.data.hierarchy import Hierarchy  # noqa: E402
from fedanon.data.table import EncodedTable  # noqa: E402
from fedanon.dp.marginals import MarginalSpec, contingency  # noqa: E402
from fedanon.dp.randomness import randomness  # noqa: E402
from fedanon.dp.statistics import StatisticsRequest, release_statistics  # noqa: E402

from bench.tables import DATA, load_adult  # noqa: E402

MARGINALS = ("sex,race", "age:1", "education", "workclass,salary-class")


def _cells(release: dict) -> list[int]:
    return [release["total"]["count"]] + [c[-1] for m in release["marginals"] for c in m["cells"]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--parties", type=int, default=3)
    ap.add_argument("--transport", choices=["grpc", "memory"], default="grpc")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    header, rows, _qis = load_adult()
    request = StatisticsRequest(args.epsilon, tuple(MarginalSpec.parse(m) for m in MARGINALS))
    hierarchies = {a: Hierarchy.read_csv(DATA / f"adult_hierarchy_{a}.csv", a) for a in request.attributes}
    table = EncodedTable.from_rows(header, rows)
    truth = [table.n_rows] + [int(c) for s in request.marginals
                              for c in contingency(table, hierarchies, s)[1].reshape(-1)]
    out = {"machine": platform.machine(), "python": platform.python_version(), "rows": table.n_rows,
           "marginals": list(MARGINALS), "cells": len(truth), "epsilon": args.epsilon, "parties": args.parties,
           "transport": args.transport, "runs": []}
    local_times = []
    for _ in range(3):  # the first also loads OpenDP: the median of three
        t0 = time.perf_counter()
        local = release_statistics(table, hierarchies, list(request.marginals), args.epsilon, randomness(None))
        local_times.append(time.perf_counter() - t0)
    local_s = sorted(local_times)[1]
    runs = [{"run": "local release (fedanon stats)", "seconds": local_s, "ratio": 1.0,
             "max_abs_noise": int(np.max(np.abs(np.array(_cells(local)) - truth)))}]
    paths = {a: DATA / f"adult_hierarchy_{a}.csv" for a in request.attributes}
    for protocol in ("B", "C", "A"):
        for split in ("horizontal", "vertical"):
            t0 = time.perf_counter()
            run = simulate_statistics(header, rows, paths, request, args.parties, protocol=protocol,
                                      distribution=split, transport=args.transport)
            seconds = time.perf_counter() - t0
            holder = run.party_reports[run.report["result_recipient"]]["phases"]
            runs.append({"run": f"{protocol}, {split}", "seconds": seconds, "ratio": seconds / local_s,
                         "key_holder_encrypt_s": holder.get("encrypt", 0.0),
                         "key_holder_decrypt_s": holder.get("decrypt", 0.0),
                         "max_abs_noise": int(np.max(np.abs(np.array(_cells(run.release)) - truth)))})
    out["runs"] = runs
    print(f"{'run':<32} {'time':>8} {'x local':>9} {'holder enc':>10} {'holder dec':>10} {'max |noise|':>11}")
    for r in runs:
        print(f"{r['run']:<32} {r['seconds']:>7.2f}s {r['ratio']:>9.0f} {r.get('key_holder_encrypt_s', 0):>9.2f}s "
              f"{r.get('key_holder_decrypt_s', 0):>9.2f}s {r['max_abs_noise']:>11}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
