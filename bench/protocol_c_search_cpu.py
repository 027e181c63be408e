#!/usr/bin/env python3
"""CPU seconds per component of Protocol C's search, in one process on one core.

    python3 bench/protocol_c_search_cpu.py [--k 5] [--suppression 0.05] [--metric nonuniform-entropy]
                                           [--model k|recursive-l] [--counters elgamal|paillier]
                                           [--json OUT.json]

ADULT (8 QIs, as bench/protocol_c.py; `recursive-l`: recursive-(4,3)-diversity of occupation
on the other 7 QIs and salary-class), padded with 25 % pseudotuples, real row counters
(ElGamal by default, or Paillier-3072; with Paillier, a suppression limit and an entropy metric
also the ElGamal screening counters, as the protocol makes them); the helper's `EncryptedCountChecker` and the key
holder's `CountJudge` in one process, pinned to one core (so that Paillier's sums and
encryptions, which would otherwise go to a pool of worker processes, count here), no daemons. Prints, per component, the CPU seconds (process time) and
calls, the setup's CPU seconds (totals and leaf marginals, before the first check), and the search's CPU and wall time with the load average. CPU time, unlike the
daemons' wall time in bench/protocol_c.py, hardly depends on how loaded the machine is:
compare revisions by running this with PYTHONPATH pointing at each checkout, one after the
other.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: a checkout named there wins

QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
L_QIS = [q for q in QIS if q != "occupation"] + ["salary-class"]

#: (object, method, label): helper side "H", key holder "K"; nested labels overlap their callers
PROBES = [("checker", "screen_request", "H screening sums"), ("sums", "_hub", "H   of which hubs"),
          ("sums", "node", "H node sums of full checks"), ("checker", "_classes_request", "H packing full checks"),
          ("checker", "marginals_request", "H suppression marginals"), ("grouper", "classes", "H grouping"),
          ("judge", "_screen", "K screening sums"), ("judge", "_stats", "K decrypting full checks"),
          ("checker", "omitted_request", "H left-out classes for the query"),
          ("judge", "_suppression_query", "K encrypting suppression queries"),
          ("judge", "_omitted_classes", "K decrypting left-out classes (+ query)"),
          ("judge", "_finish", "K suppression marginals"), ("judge", "answer", "K all answers")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--suppression", type=float, default=0.05)
    ap.add_argument("--metric", default="nonuniform-entropy")
    ap.add_argument("--model", choices=["k", "recursive-l"], default="k")
    ap.add_argument("--counters", choices=["elgamal", "paillier"], default="elgamal")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    if hasattr(os, "sched_setaffinity"):  # one core: every crypto batch stays in this process
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    import numpy as np

    import fedanon
    from fedanon.crypto.counters import generate_counter_key
    from fedanon.data.hierarchy import Hierarchy
    from fedanon.engine import EncodedTable, read_table_csv
    from fedanon.engine.anonymizer import prepare_structure, search
    from fedanon.model.config import AnonymizationConfig
    from fedanon.model.privacy.ldiversity import LDiversity
    from fedanon.protocols.c.counted_checks import CountJudge, EncryptedCountChecker, RowCounters
    from fedanon.protocols.c.pseudotuples import resample_rows
    try:  # the screening counters (an older revision given by PYTHONPATH may lack them)
        from fedanon.protocols.c.counted_checks import SCREEN_SCHEME, screen_counters_wanted
    except ImportError:
        screen_counters_wanted = None

    qis = L_QIS if args.model == "recursive-l" else QIS
    data = Path(fedanon.__file__).parent / "data" / "adult"
    columns, rows = read_table_csv(data / "adult.csv")
    hierarchies = {a: Hierarchy.read_csv(data / f"adult_hierarchy_{a}.csv", a) for a in qis}
    rng = np.random.default_rng(3)
    fakes = resample_rows(rows, int(len(rows) * 0.25), rng=rng)
    padded = rows + fakes
    real = np.r_[np.ones(len(rows), bool), np.zeros(len(fakes), bool)]
    order = rng.permutation(len(padded))
    table = EncodedTable.from_rows(columns, [padded[i] for i in order])
    key = generate_counter_key(args.counters)
    pub = key.public_key
    counters = RowCounters(pub.load(pub.encrypt_counters(real[order].tolist(), workers=1)))
    extra = {"l_diversity": LDiversity("recursive", 3, "occupation", 4)} if args.model == "recursive-l" else {}
    config = AnonymizationConfig(qis, k=args.k, suppression=args.suppression, metric=args.metric, **extra)
    screen: dict[str, object] = {}  # the screening key where the protocol makes one, as the protocol does
    if screen_counters_wanted is not None and screen_counters_wanted(config, args.counters):
        screen_key = generate_counter_key(SCREEN_SCHEME)
        counters.screen = screen_key.public_key.load(screen_key.public_key.encrypt_counters(real[order].tolist(),
                                                                                            workers=1))
        screen = {"helper": screen_key.public_key, "key_holder": screen_key}
    structure = prepare_structure(table, hierarchies, config, require_subset=False)
    box: dict[str, CountJudge] = {}
    s0 = time.process_time()  # setup: the totals and (entropy metrics) leaf marginals, summed and decrypted
    checker = EncryptedCountChecker(structure, pub, counters, lambda request: box["judge"].answer(request),
                                    **({"screen_key": screen["helper"]} if screen else {}))
    box["judge"] = judge = CountJudge(key, config, checker.setup_request(), workers=1,
                                      **({"screen_key": screen["key_holder"]} if screen else {}))
    checker.adopt(judge.facts())
    setup_cpu = time.process_time() - s0

    acc: dict[str, list[float]] = {}
    owners = {"checker": checker, "sums": checker.sums, "grouper": checker.grouper, "judge": judge}
    for owner, name, label in PROBES:
        obj = owners[owner]
        inner = getattr(obj, name, None)
        if inner is None:  # an older revision without this step
            continue

        def timed(*a, _inner=inner, _label=label, **kw):
            c0 = time.process_time()
            try:
                return _inner(*a, **kw)
            finally:
                entry = acc.setdefault(_label, [0.0, 0])
                entry[0] += time.process_time() - c0
                entry[1] += 1

        setattr(obj, name, timed)
    load_start = os.getloadavg()
    c0, t0 = time.process_time(), time.perf_counter()
    outcome = search(structure, checker)
    report = {"setup_cpu_s": round(setup_cpu, 2), "search": {"cpu_s": round(time.process_time() - c0, 2), "wall_s": round(time.perf_counter() - t0, 2)},
              "components": {label: {"cpu_s": round(c, 2), "calls": n} for label, (c, n) in sorted(acc.items())},
              "checks": checker.checks, "screened": checker.screened, "suppression_rounds": checker.suppression_rounds,
              "optimum": [int(x) for x in structure.lattice.node_levels(outcome.node)], "model": args.model,
              "k": args.k, "suppression": args.suppression, "metric": args.metric, "counters": args.counters,
              "screening_counters": bool(screen),
              "fedanon": str(Path(fedanon.__file__).parent), "load_start": list(load_start),
              "load_end": list(os.getloadavg())}
    checker.close()
    for label, entry in report["components"].items():
        print(f"{label:<36}{entry['cpu_s']:>8.2f} s {entry['calls']:>6} calls")
    print(f"{'setup (totals, leaf marginals)':<36}{report['setup_cpu_s']:>8.2f} s")
    print(f"{'search':<36}{report['search']['cpu_s']:>8.2f} s CPU, {report['search']['wall_s']:.1f} s wall; "
          f"{report['checks']} checks, {report['screened']} screened, {report['suppression_rounds']} suppression "
          f"rounds; load {load_start[0]:.1f} -> {report['load_end'][0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
