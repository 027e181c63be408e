#!/usr/bin/env python3
"""CPU time per phase of one anonymization of resampled ADULT: prepare, search, materialize.

    python3 bench/phases.py [--rows 1.2,4.8] [--suppression 0.05] [--repeat 2]
                            [--compare-with OLD_SRC] [--json OUT.json]

`bench/scale.py` divides the report's `elapsed_s` (prepare + search + materialization)
by the checks, so its per-check time carries the linear preparation and the one final
row grouping; this script separates them, in-process, by CPU time (`time.process_time`:
meaningful on a loaded shared machine). Each measurement runs in a fresh child process
of the source tree it measures (this one and, with `--compare-with`, an older checkout),
alternately, `--repeat` rounds; same optimum asserted. Same table as `bench/scale.py`:
ADULT resampled to each size (seeded), 9 QIs, k = 5.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(millions: float, suppression: float) -> dict:
    """One run in this process (the child): CPU seconds of each phase, checks, optimum."""
    import numpy as np

    from bench.tables import ATTRS, load_adult, resample_codes
    from fedanon.engine import AnonymizationConfig, EncodedTable
    from fedanon.engine.anonymizer import materialize, prepare
    from fedanon.engine.search.flash import FlashSearch

    header, rows, hier = load_adult()
    table = resample_codes(EncodedTable.from_rows(header, rows), int(round(millions * 1_000_000)))
    # column-major, as the CLI's CSV reader builds it
    table = EncodedTable(table.columns, np.asfortranarray(table.codes), table.dictionaries)
    config = AnonymizationConfig(ATTRS, k=5, suppression=suppression)
    c0 = time.process_time()
    prep = prepare(table, hier, config)
    c1 = time.process_time()
    outcome = FlashSearch(prep.lattice, prep.checker, None).run()
    c2 = time.process_time()
    levels = prep.lattice.node_levels(outcome.node)
    _, suppressed, _ = materialize(prep, levels, prep.checker, prep.grouper.group_rows(levels, keep_rows=True))
    c3 = time.process_time()
    return {"rows": table.n_rows, "suppression": suppression, "prepare_cpu_s": c1 - c0, "search_cpu_s": c2 - c1,
            "materialize_cpu_s": c3 - c2, "checks": outcome.checks, "transformation": [int(x) for x in levels],
            "suppressed": int(suppressed.sum()), "search_ms_per_check": 1000 * (c2 - c1) / outcome.checks,
            "all_ms_per_check": 1000 * (c3 - c0) / outcome.checks}


def run_child(src: Path, millions: float, suppression: float) -> dict:
    """`measure` in a fresh process importing the engine of `src`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(millions), str(suppression)],
                         cwd=src, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="1.2,4.8", help="row counts in millions")
    ap.add_argument("--suppression", default="0.05", help="suppression limits")
    ap.add_argument("--repeat", type=int, default=2, help="alternating rounds (take the least CPU)")
    ap.add_argument("--compare-with", metavar="OLD_SRC", default=None, help="also measure this source tree, alternately")
    ap.add_argument("--json", metavar="OUT.json")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(measure(float(args.child[0]), float(args.child[1]))))
        return 0
    trees = [("this", ROOT)] + ([("reference", Path(args.compare_with).resolve())] if args.compare_with else [])
    results = []
    for millions in [float(x) for x in args.rows.split(",") if x]:
        for s in [float(x) for x in args.suppression.split(",") if x]:
            for round_ in range(args.repeat):
                for name, src in trees:
                    r = run_child(src, millions, s)
                    r.update(tree=name, round=round_, load=" ".join(Path("/proc/loadavg").read_text().split()[:3]))
                    first = next((x for x in results if x["rows"] == r["rows"] and x["suppression"] == s), None)
                    if first and (first["transformation"], first["suppressed"]) != (r["transformation"], r["suppressed"]):
                        raise SystemExit(f"different result: {name} at {r['rows']} rows, s={s}")
                    results.append(r)
                    print(f"  {r['rows']:>10,} s={s:.0%} {name:9}: prepare {r['prepare_cpu_s']:.2f} search "
                          f"{r['search_cpu_s']:.2f} materialize {r['materialize_cpu_s']:.2f} CPU s, {r['checks']} checks, "
                          f"search {r['search_ms_per_check']:.1f} ms/check, all {r['all_ms_per_check']:.1f} ms/check "
                          f"(load {r['load']})", file=sys.stderr)
    print("least CPU of the rounds:")
    best = {}
    for r in results:
        k = (r["tree"], r["rows"], r["suppression"])
        if k not in best or r["search_cpu_s"] < best[k]["search_cpu_s"]:
            best[k] = r
    for (tree, n, s), r in sorted(best.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        print(f"  {tree:9} {n:>10,} s={s:.0%}: search {r['search_ms_per_check']:.1f} ms/check, "
              f"with prepare+materialize {r['all_ms_per_check']:.1f} ms/check")
    for (tree, n, s), r in best.items():
        smaller = [x for (t2, n2, s2), x in best.items() if t2 == tree and s2 == s and n2 < n]
        for base in smaller:
            growth = n / base["rows"]
            for field in ("search_ms_per_check", "all_ms_per_check"):
                ratio = r[field] / base[field]
                print(f"  {tree} s={s:.0%} {field}: {base['rows']:,} -> {n:,} rows x{ratio:.2f} for x{growth:g} rows "
                      f"= {ratio / growth:.2f} x the row growth")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": os.uname().machine, "cpus": os.cpu_count(),
                                               "runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
