#!/usr/bin/env python3
"""Benchmark of Protocol A (commutative encryption around a ring, no helper) on ADULT.

    python3 bench/protocol_a.py [--parties 2 3 5] [--split horizontal vertical] [--cipher ec|ph]
                                [--transport grpc|memory] [--scale-rows 1200000] [--json OUT.json]

ADULT (bundled copy, 30,162 rows, 9 QIs: the 8 usual ones plus salary-class, all with
hierarchies; 5-anonymity, 2 % suppression, loss metric), split over 2, 3 and 5 parties,
horizontally and vertically. By default every party is a separate daemon on 127.0.0.1
(gRPC over mutual TLS); all of them share this machine's cores.

Per run: wall time of the protocol (the slowest party's role time, daemon start-up
excluded; "w/o anon" = the same minus the master's anonymize phase, i.e. the
protocol's own cost), time and payload bytes per phase and party, the counted commutative
operations per party next to the analytical model of §4.4.3.4 (e_v = n·(r + d/n)
vertically, e_h = n·d horizontally, with d the distinct values of data and hierarchies),
and the *floor*: all parties' counted operations ÷ the cipher's throughput on this
machine, measured in the same run with as many crypto processes as a 3-party run has. "x floor" = elapsed ÷ floor.
With --scale-rows N, one more run: N rows resampled from ADULT, 3 parties, vertical.
JSON: {"runs": [{"split", "parties", "cipher", "elapsed_s", "commutative_ops", "floor_s",
"bytes_sent_max_party", "equal_to_centralized", ...}], "machine": {...}}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import fedanon  # noqa: E402
from fedanon.consortium.simulation import simulate_table  # noqa: E402
from fedanon.crypto import parallel  # noqa: E402
from fedanon.crypto.commutative import get_commutative_cipher  # noqa: E402
from fedanon.model.config import AnonymizationConfig  # noqa: E402
from fedanon.data.io.delimited import read_table_csv  # noqa: E402
from fedanon.data.hierarchy import Hierarchy  # noqa: E402
from fedanon.protocols.sim.equivalence import centralized, differences  # noqa: E402
from fedanon.protocols.a.protocol import PHASES  # noqa: E402

DATA = Path(fedanon.__file__).parent / "data" / "adult"
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation",
       "salary-class"]
DISSERTATION = {"vertical_3_s": 30.0, "bytes_vertical": 12.3e6, "bytes_horizontal": 2.85e6}


def load() -> tuple[list[str], list[list[str]], dict[str, Path], dict[str, Hierarchy]]:
    columns, rows = read_table_csv(DATA / "adult.csv")
    paths = {q: DATA / f"adult_hierarchy_{q}.csv" for q in QIS}
    keep = [columns.index(q) for q in QIS]
    return QIS, [[r[i] for i in keep] for r in rows], paths, {q: Hierarchy.read_csv(p, q) for q, p in paths.items()}


def resample(rows: list[list[str]], n: int, seed: int = 7) -> list[list[str]]:
    """Each attribute from a different random row (seeded): realistic marginals, no copied rows."""
    rng = np.random.default_rng(seed)
    width = len(rows[0])
    cols = [np.asarray([r[c] for r in rows], dtype=object)[rng.integers(0, len(rows), size=n)] for c in range(width)]
    return [list(t) for t in zip(*cols)]


def cipher_ops_per_s(name: str, workers: int, seconds: float = 4.0) -> float:
    """Throughput of adding one layer with `workers` processes (the machine's capacity for the floor).

    `workers` = as many crypto processes as a 3-party run has (each daemon: one per core), so
    that on a machine shared with other jobs the measurement gets the CPU share the run gets.
    One untimed batch first (starts the worker pool), then whole batches for >= `seconds`.
    """
    cipher = get_commutative_cipher(name)
    key = cipher.generate()
    batch = 20_000 if name == "ec" else 256
    elements = cipher.hash_to_group([b"bench-%d" % i for i in range(batch)])
    parallel.warm_up(workers)
    key.encrypt_many(elements, workers=workers)
    done, start = 0, time.perf_counter()
    while done < 3 * batch or time.perf_counter() - start < seconds:
        key.encrypt_many(elements, workers=workers)
        done += len(elements)
    return done / (time.perf_counter() - start)


def model_ops(split: str, n: int, rows: list[list[str]], hierarchies: dict[str, Hierarchy]) -> int:
    """§4.4.3.4 per party: e_v = n·(r + d/n) = n·r + d, e_h = n·d; d = distinct values (data ∪ hierarchy)."""
    d = 0
    for c, q in enumerate(QIS):
        d += len({r[c] for r in rows} | {v.decode() for row in hierarchies[q].rows for v in row})
    return n * len(rows) + d if split == "vertical" else n * d


def load_avg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def one_run(rows, paths, hierarchies, config, central, split: str, n: int, cipher: str, transport: str,
            ops_per_s: float) -> dict[str, Any]:
    options = {"cipher": cipher}
    if cipher == "ph":
        options["receive_timeout_s"] = 7200.0
    sim = simulate_table(QIS, rows, paths, config, split, n, options=options, transport=transport, protocol="A")
    reports = sim.party_reports
    master = next(r for r in reports.values() if r.get("is_master"))
    ok = not differences(central, master["transformation"], sim.columns, sim.rows)
    elapsed = max(sum(r["phases"].values()) for r in reports.values())
    ops = {p: r["operations"] for p, r in reports.items()}
    total_ops = sum(o["commutative"] for o in ops.values())
    sent = {p: sum(r["traffic"]["bytes_sent_by_phase"].values()) for p, r in reports.items()}
    phase_s = {p: max(r["phases"].get(p, 0.0) for r in reports.values()) for p in PHASES}
    bytes_by_phase = {p: sum(r["traffic"]["bytes_sent_by_phase"].get(p, 0) for r in reports.values()) for p in PHASES}
    floor = total_ops / ops_per_s
    return {
        "split": split, "parties": n, "cipher": cipher, "transport": transport, "rows": len(rows),
        "elapsed_s": round(elapsed, 4), "commutative_ops": total_ops,
        "commutative_ops_per_party": {p: o["commutative"] for p, o in ops.items()},
        "encrypt_ops_per_party": {p: o["encrypt"] for p, o in ops.items()},
        "hash_ops_per_party": {p: o["hash"] for p, o in ops.items()},
        "model_encrypt_ops_per_party": model_ops(split, n, rows, hierarchies),
        "floor_s": round(floor, 4), "x_floor": round(elapsed / floor, 3) if floor else None,
        "pre_post_s": round(elapsed - phase_s["anonymize"], 4),
        "bytes_sent_max_party": max(sent.values()), "bytes_sent_per_party": sent,
        "phase_s_max_party": {p: round(s, 4) for p, s in phase_s.items()}, "bytes_sent_by_phase": bytes_by_phase,
        "party_phase_s": {p: r["phases"] for p, r in reports.items()},
        "transformation": master["transformation"], "equal_to_centralized": ok,
        "load_avg_after": load_avg(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parties", type=int, nargs="+", default=[2, 3, 5])
    ap.add_argument("--split", nargs="+", choices=["horizontal", "vertical"], default=["horizontal", "vertical"])
    ap.add_argument("--cipher", choices=["ec", "ph"], default="ec")
    ap.add_argument("--transport", choices=["grpc", "memory"], default="grpc")
    ap.add_argument("--scale-rows", type=int, default=0, help="also run N resampled rows, 3 parties, vertical")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    columns, rows, paths, hierarchies = load()
    config = AnonymizationConfig(QIS, k=5, suppression=0.02, metric="loss")
    machine = {"python": platform.python_version(), "cores": parallel.available_cores(),
               "machine": platform.machine(), "load_avg_before": load_avg()}
    print(f"# Protocol A benchmark (Python {machine['python']}, {machine['cores']} cores, load {machine['load_avg_before']})")
    workers = 3 * parallel.available_cores()
    ops_per_s = cipher_ops_per_s(args.cipher, workers)
    machine["cipher_ops_per_s"] = round(ops_per_s, 1)
    machine["cipher_throughput_processes"] = workers
    print(f"{args.cipher} throughput, {workers} processes on {parallel.available_cores()} cores (same run): "
          f"{ops_per_s:,.0f} ops/s")
    central = centralized(columns, rows, hierarchies, config)
    machine["central_anonymize_s"] = round(central.result.elapsed_s, 4)
    print(f"centralized reference (same run): anonymize {central.result.elapsed_s:.3f} s, "
          f"transformation {central.result.transformation}")
    print(f"{'split':<11}{'n':>2} {'elapsed s':>9} {'w/o anon':>8} {'floor s':>8} {'x floor':>7} {'ops (all)':>10} "
          f"{'ops/party model':>15} {'ops/party counted':>17} {'MB max party':>12}  "
          f"{'s per phase: ' + ' / '.join(p[:3] for p in PHASES):<40} ok")
    runs = []
    plan = [(s, n, rows, central) for s in args.split for n in args.parties]
    if args.scale_rows:
        big = resample(rows, args.scale_rows)
        plan.append(("vertical", 3, big, centralized(columns, big, hierarchies, config)))
    for split, n, data, reference in plan:
        r = one_run(data, paths, hierarchies, config, reference, split, n, args.cipher, args.transport, ops_per_s)
        runs.append(r)
        counted = max(r["encrypt_ops_per_party"].values())
        print(f"{split:<11}{n:>2} {r['elapsed_s']:>9.2f} {r['pre_post_s']:>8.2f} {r['floor_s']:>8.2f} {r['x_floor']:>7.2f} "
              f"{r['commutative_ops']:>10,} {r['model_encrypt_ops_per_party']:>15,} {counted:>17,} "
              f"{r['bytes_sent_max_party'] / 1e6:>12.2f}  "
              f"{' / '.join('%.2f' % r['phase_s_max_party'][p] for p in PHASES):<40} "
              f"{'yes' if r['equal_to_centralized'] else 'NO'}"
              + (f"  [{len(data):,} rows]" if len(data) != len(rows) else ""))
    machine["load_avg_after"] = load_avg()
    print(f"load average after: {machine['load_avg_after']} (other work on this machine inflates elapsed)")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "machine": machine, "dissertation": DISSERTATION},
                                        indent=2) + "\n")
    return 0 if all(r["equal_to_centralized"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
