#!/usr/bin/env python3
"""Benchmark of Protocol C (pseudotuples + encrypted row counters) on ADULT.

    python3 bench/protocol_c.py [--json OUT.json] [--k 5 100] [--counters paillier elgamal]
                                [--split horizontal vertical] [--transport grpc|memory]
                                [--suppression S] [--metric NAME]

ADULT (bundled copy, 30,162 rows, 8 QIs, loss metric, no suppression unless told), 3 primaries +
helper, 25 % pseudotuples, for each k, counter scheme and split. Every party runs as a
separate daemon on 127.0.0.1 (gRPC over mutual TLS, fresh certificates) unless
--transport memory. Reported per run: wall time of the run at the key holder (= result
recipient, p1) from run start to decrypted result, its split into phases (encrypt,
integrate, anonymize, decrypt), bytes sent by all parties per phase, the number of
checks (nodes the helper asked the key holder about) and the time per check (the
helper's anonymize phase / checks), and the key holder's own check of the decrypted
result (`result_check`, part of its decrypt phase).

References:
* the dissertation (§4.6.4.3, 768-bit Paillier, Java + GMP, four machines on Fast
  Ethernet): 37-48 s and 37-49 MB for ADULT, 5-anonymity, 25 % pseudotuples;
* measured in the same run: Protocol B on the same data and settings ("vs B" = C's
  time / B's time), i.e. what hiding the class sizes costs.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fedanon.cli.simulate import simulate_table  # noqa: E402
from fedanon.model.config import AnonymizationConfig  # noqa: E402
from fedanon.data.io.delimited import read_table_csv  # noqa: E402
from fedanon.data.hierarchy import Hierarchy  # noqa: E402
from fedanon.protocols.sim.equivalence import centralized, differences  # noqa: E402

import fedanon  # noqa: E402

DATA = Path(fedanon.__file__).parent / "data" / "adult"
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
PHASES = ("encrypt", "integrate", "anonymize", "decrypt")
DISSERTATION = {"seconds": (37.0, 48.0), "megabytes": (37.0, 49.0)}


def measure(sim) -> dict[str, Any]:
    reports = sim.party_reports
    recipient = sim.report.get("result_recipient", "p1")
    rec = reports[recipient]["phases"]
    helper = reports["helper"]
    sent = {p: 0 for p in PHASES}
    for rep in reports.values():
        for phase, n in rep.get("traffic", {}).get("bytes_sent_by_phase", {}).items():
            if phase in sent:
                sent[phase] += n
    checks = int(helper.get("checks", 0))
    check_s = float(reports[recipient].get("result_check_s", 0.0))
    anonymize = float(helper["phases"].get("anonymize", 0.0))
    return {"elapsed_s": round(sum(rec.get(p, 0.0) for p in PHASES), 4),
            "recipient_s": {p: round(rec.get(p, 0.0), 4) for p in PHASES},
            "bytes_sent": sent, "bytes_total": sum(sent.values()), "checks": checks,
            "s_per_check": round(anonymize / checks, 5) if checks else None, "result_check_s": round(check_s, 4),
            "transformation": helper.get("transformation")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, nargs="+", default=[5, 100])
    ap.add_argument("--counters", nargs="+", default=["paillier", "elgamal"], choices=["paillier", "elgamal"])
    ap.add_argument("--split", nargs="+", default=["horizontal", "vertical"], choices=["horizontal", "vertical"])
    ap.add_argument("--pseudotuples", type=float, default=0.25)
    ap.add_argument("--suppression", type=float, default=0.0)
    ap.add_argument("--metric", default="loss")
    ap.add_argument("--transport", choices=["grpc", "memory"], default="grpc")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    columns, rows = read_table_csv(DATA / "adult.csv")
    paths = {q: DATA / f"adult_hierarchy_{q}.csv" for q in QIS}
    hierarchies = {q: Hierarchy.read_csv(p, q) for q, p in paths.items()}
    load = os.getloadavg()
    print(f"# Protocol C benchmark  ({platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} cores, load average at start {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f})")
    print(f"ADULT {len(rows):,} rows, {len(QIS)} QIs, metric {args.metric}, suppression {args.suppression:g}, "
          f"3 primaries + helper, "
          f"{args.pseudotuples:.0%} pseudotuples, transport {args.transport}")
    results: dict[str, Any] = {"machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                                           "load_average_at_start": list(load), "transport": args.transport},
                               "dissertation": DISSERTATION, "runs": [], "reference_b": []}
    print()
    print(f"{'split':<11}{'k':>4}  {'counters':<9}{'total s':>8}  {'vs B':>6}  "
          f"{'recipient s: enc / int / anon / dec':<40}{'MB sent: enc / int / anon / dec':<34}"
          f"{'MB':>7}{'checks':>7}{'ms/check':>9}{'check s':>8}  equal")
    failures = 0
    for k in args.k:
        config = AnonymizationConfig(QIS, k=k, suppression=args.suppression, metric=args.metric)
        central = centralized(columns, rows, hierarchies, config)
        for split in args.split:
            t = time.perf_counter()
            b = simulate_table(columns, rows, paths, config, split, 3, transport=args.transport, protocol="B")
            b_m = measure(b)
            b_m.update({"split": split, "k": k, "wall_s": round(time.perf_counter() - t, 3)})
            results["reference_b"].append(b_m)
            for scheme in args.counters:
                sim = simulate_table(columns, rows, paths, config, split, 3, transport=args.transport, protocol="C",
                                     options={"counters": scheme, "pseudotuples": args.pseudotuples})
                m = measure(sim)
                equal = not differences(central, m["transformation"], sim.columns, sim.rows)
                failures += not equal
                ratio = m["elapsed_s"] / b_m["elapsed_s"] if b_m["elapsed_s"] else float("nan")
                phases = " / ".join(f"{m['recipient_s'][p]:.2f}" for p in PHASES)
                mb = " / ".join(f"{m['bytes_sent'][p] / 1e6:.2f}" for p in PHASES)
                per_check = f"{m['s_per_check'] * 1e3:.1f}" if m["s_per_check"] is not None else "-"
                print(f"{split:<11}{k:>4}  {scheme:<9}{m['elapsed_s']:>8.2f}  {ratio:>5.0f}x  {phases:<40}{mb:<34}"
                      f"{m['bytes_total'] / 1e6:>7.2f}{m['checks']:>7}{per_check:>9}{m['result_check_s']:>8.2f}  "
                      f"{'yes' if equal else 'NO'}",
                      flush=True)
                results["runs"].append({"split": split, "k": k, "counters": scheme, "elapsed_s": m["elapsed_s"],
                                        "checks": m["checks"], "bytes_total": m["bytes_total"],
                                        "equal_to_centralized": equal, "recipient_s": m["recipient_s"],
                                        "bytes_sent_by_phase": m["bytes_sent"], "s_per_check": m["s_per_check"],
                                        "vs_protocol_b": ratio, "protocol_b_elapsed_s": b_m["elapsed_s"],
                                        "result_check_s": m["result_check_s"], "metric": args.metric,
                                        "suppression": args.suppression, "load_average": list(os.getloadavg())})
    load = os.getloadavg()
    results["machine"]["load_average_at_end"] = list(load)
    print(f"\nload average at end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; dissertation (768-bit Paillier, "
          f"4 machines): {DISSERTATION['seconds'][0]:.0f}-{DISSERTATION['seconds'][1]:.0f} s, "
          f"{DISSERTATION['megabytes'][0]:.0f}-{DISSERTATION['megabytes'][1]:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
