#!/usr/bin/env python3
"""Benchmark of Protocol C (pseudotuples + encrypted row counters) on ADULT.

    python3 bench/protocol_c.py [--json OUT.json] [--k 5 100] [--counters paillier elgamal]
                                [--split horizontal vertical] [--transport grpc|memory]
                                [--suppression 0 0.02 0.05] [--metric loss nonuniform-entropy]
                                [--model k recursive-l] [--baseline DIR [--baseline-timeout S]] [--no-b]
                                [--repeat N]

ADULT (bundled copy, 30,162 rows, 8 QIs, loss metric, no suppression unless told), 3 primaries +
helper, 25 % pseudotuples, for each model, k, suppression, metric, counter scheme and split.
Models: `k` (k-anonymity on the 8 QIs) and `recursive-l` (recursive-(4,3)-diversity of
`occupation`, which is then sensitive, with k-anonymity at the given k -- `--k 1` for the
diversity alone -- on the other 7 QIs and `salary-class`). Every party runs as a
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
  time / B's time), i.e. what hiding the class sizes costs (`--no-b` skips it);
* with `--baseline DIR` (a checkout of another revision, e.g. `git worktree add`): every C run
  once more with that revision's `fedanon` (and its daemons), right after, in a child process
  (`--child`), stopped after `--baseline-timeout` seconds ("old s" then reads "> limit"); "x old"
  = old time / this revision's time.

Also per run: key-holder round trips (c/check -> c/answer), checks the key holder decided from
one screening sum, suppression rounds.

With `--repeat N` every C run is made N times, one after the other: the row reports the median
time (with the fastest and slowest in "range") and the phases, bytes and counts of the median
run; every repetition must equal the centralized result. Why: the daemons' wall time on a
2-core machine varies by ±20 % from run to run, more than many of the differences measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: a checkout named there (--baseline's child) wins

from fedanon.consortium.simulation import simulate_table  # noqa: E402
from fedanon.model.config import AnonymizationConfig  # noqa: E402
from fedanon.data.io.delimited import read_table_csv  # noqa: E402
from fedanon.data.hierarchy import Hierarchy  # noqa: E402
from fedanon.model.privacy.ldiversity import LDiversity  # noqa: E402
from fedanon.protocols.sim.equivalence import centralized, differences  # noqa: E402

import fedanon  # noqa: E402

DATA = Path(fedanon.__file__).parent / "data" / "adult"
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
#: recursive-(4,3)-diversity of occupation: the other QIs and salary-class (as bench/engine.py)
L_QIS = [q for q in QIS if q != "occupation"] + ["salary-class"]
MODELS = ("k", "recursive-l")
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
            "round_trips": helper.get("key_holder_round_trips"), "screened": helper.get("screened_checks"),
            "suppression_rounds": helper.get("suppression_rounds"),
            "recipient_s": {p: round(rec.get(p, 0.0), 4) for p in PHASES},
            "bytes_sent": sent, "bytes_total": sum(sent.values()), "checks": checks,
            "s_per_check": round(anonymize / checks, 5) if checks else None, "result_check_s": round(check_s, 4),
            "transformation": helper.get("transformation")}


def _c_run(columns, rows, paths, config, split: str, scheme: str, args) -> dict[str, Any]:
    sim = simulate_table(columns, rows, paths, config, split, 3, transport=args.transport, protocol="C",
                         options={"counters": scheme, "pseudotuples": args.pseudotuples})
    m = measure(sim)
    m["columns"], m["rows"] = sim.columns, sim.rows
    return m


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median time (of an even number, the slower of the middle two): its
    phases, bytes and counts stand for the configuration."""
    ordered = sorted(runs, key=lambda r: r["elapsed_s"])
    return ordered[len(ordered) // 2]


def config_for(model: str, k: int, suppression: float, metric: str) -> AnonymizationConfig:
    if model == "recursive-l":
        return AnonymizationConfig(L_QIS, k=k, suppression=suppression, metric=metric,
                                   l_diversity=LDiversity("recursive", 3, "occupation", 4))
    return AnonymizationConfig(QIS, k=k, suppression=suppression, metric=metric)


def _baseline(args, model: str, k: int, suppression: float, metric: str, split: str, scheme: str
              ) -> dict[str, Any] | None:
    """The same C run with the `--baseline` checkout's code, in a child process (None: timed out)."""
    env = dict(os.environ, PYTHONPATH=str(args.baseline))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--k", str(k), "--suppression", str(suppression),
           "--metric", metric, "--split", split, "--counters", scheme, "--transport", args.transport,
           "--pseudotuples", str(args.pseudotuples), "--model", model]
    try:
        # in the checkout: the daemons start with `python -m fedanon`, which imports from the working directory
        done = subprocess.run(cmd, env=env, cwd=str(args.baseline), capture_output=True, text=True,
                              timeout=args.baseline_timeout)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise SystemExit(f"baseline run failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, nargs="+", default=[5, 100])
    ap.add_argument("--counters", nargs="+", default=["paillier", "elgamal"], choices=["paillier", "elgamal"])
    ap.add_argument("--split", nargs="+", default=["horizontal", "vertical"], choices=["horizontal", "vertical"])
    ap.add_argument("--pseudotuples", type=float, default=0.25)
    ap.add_argument("--suppression", type=float, nargs="+", default=[0.0])
    ap.add_argument("--metric", nargs="+", default=["loss"])
    ap.add_argument("--model", nargs="+", default=["k"], choices=MODELS)
    ap.add_argument("--transport", choices=["grpc", "memory"], default="grpc")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--no-b", action="store_true", help="skip the Protocol B reference runs")
    ap.add_argument("--baseline", type=Path, default=None, help="checkout of the revision to compare with")
    ap.add_argument("--baseline-timeout", type=float, default=600.0)
    ap.add_argument("--repeat", type=int, default=1, help="runs per C configuration (median reported)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")

    columns, rows = read_table_csv(DATA / "adult.csv")
    paths = {q: DATA / f"adult_hierarchy_{q}.csv" for q in QIS + L_QIS}
    if args.child:  # one C run, JSON on stdout (for --baseline)
        config = config_for(args.model[0], args.k[0], args.suppression[0], args.metric[0])
        m = _c_run(columns, rows, paths, config, args.split[0], args.counters[0], args)
        m.pop("rows"), m.pop("columns")
        print(json.dumps(m))
        return 0
    hierarchies = {q: Hierarchy.read_csv(p, q) for q, p in paths.items()}
    load = os.getloadavg()
    print(f"# Protocol C benchmark  ({platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} cores, load average at start {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f})")
    print(f"ADULT {len(rows):,} rows, {len(QIS)} QIs, 3 primaries + helper, "
          f"{args.pseudotuples:.0%} pseudotuples, transport {args.transport}"
          + (f", baseline {args.baseline}" if args.baseline else ""))
    results: dict[str, Any] = {"machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                                           "load_average_at_start": list(load), "transport": args.transport},
                               "dissertation": DISSERTATION, "baseline": str(args.baseline) if args.baseline else None,
                               "runs": [], "reference_b": []}
    print()
    print(f"{'model':<12}{'split':<11}{'k':>4}{'supp':>6}  {'metric':<19}{'counters':<9}{'total s':>8}{'B s':>7}{'vs B':>7}{'old s':>8}{'x old':>7}{'range':>13}  "
          f"{'recipient s: enc / int / anon / dec':<37}{'MB':>7}{'checks':>7}{'trips':>6}{'screened':>9}{'supp rd':>8}"
          f"  equal  load")
    failures = 0
    plan = [(model, k, suppression, metric) for model in args.model for k in args.k for suppression in args.suppression
            for metric in args.metric]
    for model, k, suppression, metric in plan:
        config = config_for(model, k, suppression, metric)
        central = centralized(columns, rows, hierarchies, config)
        for split in args.split:
            b_m = None
            if not args.no_b:
                t = time.perf_counter()
                b = simulate_table(columns, rows, paths, config, split, 3, transport=args.transport,
                                   protocol="B")
                b_m = measure(b)
                b_m.update({"model": model, "split": split, "k": k, "suppression": suppression, "metric": metric,
                            "wall_s": round(time.perf_counter() - t, 3)})
                results["reference_b"].append(b_m)
            for scheme in args.counters:
                repetitions = []
                for _ in range(args.repeat):
                    one = _c_run(columns, rows, paths, config, split, scheme, args)
                    one["equal"] = not differences(central, one["transformation"], one.pop("columns"), one.pop("rows"))
                    repetitions.append(one)
                times = sorted(r["elapsed_s"] for r in repetitions)
                m = median_run(repetitions)
                equal = all(r["equal"] for r in repetitions)
                failures += not equal
                spread = f"{times[0]:.1f}-{times[-1]:.1f}" if len(times) > 1 else "-"
                ratio = m["elapsed_s"] / b_m["elapsed_s"] if b_m and b_m["elapsed_s"] else float("nan")
                old = _baseline(args, model, k, suppression, metric, split, scheme) if args.baseline else None
                old_s = None if old is None else old["elapsed_s"]
                speedup = (old_s / m["elapsed_s"]) if old_s else None
                old_txt = "-" if not args.baseline else f"> {args.baseline_timeout:.0f}" if old is None \
                    else f"{old_s:.1f}"
                phases = " / ".join(f"{m['recipient_s'][p]:.1f}" for p in PHASES)
                print(f"{model:<12}{split:<11}{k:>4}{suppression:>6.0%}  {metric:<19}{scheme:<9}{m['elapsed_s']:>8.2f}"
                      f"{(b_m['elapsed_s'] if b_m else float('nan')):>7.2f}{ratio:>6.1f}x{old_txt:>8}{(f'{speedup:.1f}' if speedup else '-'):>7}{spread:>13}  {phases:<37}"
                      f"{m['bytes_total'] / 1e6:>7.2f}{m['checks']:>7}{str(m['round_trips']):>6}"
                      f"{str(m['screened']):>9}{str(m['suppression_rounds']):>8}  {'yes' if equal else 'NO':<5}"
                      f"{os.getloadavg()[0]:>6.1f}",
                      flush=True)
                results["runs"].append({
                    "model": model, "split": split, "k": k, "counters": scheme, "metric": metric, "suppression": suppression,
                    "elapsed_s": m["elapsed_s"], "elapsed_runs_s": [r["elapsed_s"] for r in repetitions],
                    "checks": m["checks"], "key_holder_round_trips": m["round_trips"],
                    "screened_checks": m["screened"], "suppression_rounds": m["suppression_rounds"],
                    "bytes_total": m["bytes_total"], "equal_to_centralized": equal,
                    "recipient_s": m["recipient_s"], "bytes_sent_by_phase": m["bytes_sent"],
                    "s_per_check": m["s_per_check"], "vs_protocol_b": ratio,
                    "protocol_b_elapsed_s": b_m["elapsed_s"] if b_m else None,
                    "baseline_elapsed_s": old_s, "baseline_timed_out": bool(args.baseline and old is None),
                    "baseline_timeout_s": args.baseline_timeout if args.baseline else None,
                    "baseline_checks": None if old is None else old.get("checks"),
                    "speedup_vs_baseline": speedup,
                    "result_check_s": m["result_check_s"], "load_average": list(os.getloadavg())})
    load = os.getloadavg()
    results["machine"]["load_average_at_end"] = list(load)
    print(f"\nload average at end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; dissertation (768-bit Paillier, "
          f"4 machines, loss, no suppression): {DISSERTATION['seconds'][0]:.0f}-{DISSERTATION['seconds'][1]:.0f} s, "
          f"{DISSERTATION['megabytes'][0]:.0f}-{DISSERTATION['megabytes'][1]:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
