#!/usr/bin/env python3
"""Scale benchmark of the engine: rows (end to end through the CLI) and QIs (search space).

    python3 bench/scale.py [--rows 0.3,1.2,4.8,12] [--suppression 0,0.05]
                           [--qis 9,11,13,15] [--time-limit 150] [--json OUT.json]

Rows: ADULT resampled (each attribute drawn from a different random row, seeded) to
each size in millions, 9 QIs, k = 5, each suppression limit: `fedanon anonymize`
is run as a child process under /usr/bin/time, so the figures are what a user sees:
end-to-end wall time, search time (the report's `elapsed_s`: prepare, search and
materialization), checks, per-check time and peak RSS of the process. The reference
measured in the same run is the search time itself (end-to-end / search) and the
smallest row count (per-check growth relative to row growth).

QIs: ADULT (30,162 rows) with its 9 QIs plus copies of age, education,
marital-status, workclass, sex, race (in that order) under new names, k = 5: lattice
size, whether exact Flash (≤ the node budget) or the heuristic ran, time,
optimum_found, loss lower bound and gap under `--time-limit`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.tables import ATTRS, DATA, load_adult, resample_codes  # noqa: E402
from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, anonymize  # noqa: E402
from fedanon.engine.heuristic import DEFAULT_NODE_BUDGET, SearchLimits  # noqa: E402

COPIES = ["age", "education", "marital-status", "workclass", "sex", "race"]


def write_csv(table: EncodedTable, path: Path) -> None:
    """Write a (large) encoded table as ;-separated CSV in column batches with pyarrow."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    arrays = []
    for c in range(len(table.columns)):
        values = pa.array([v.decode() for v in table.dictionaries[c]], type=pa.string())
        arrays.append(pa.DictionaryArray.from_arrays(pa.array(table.codes[:, c]), values).cast(pa.string()))
    with open(path, "wb") as fh:  # header unquoted, as the bundled data
        fh.write((";".join(table.columns) + "\n").encode())
        pacsv.write_csv(pa.table(arrays, names=table.columns), fh,
                        write_options=pacsv.WriteOptions(delimiter=";", quoting_style="none", include_header=False))


def load_state() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def run_cli(csv: Path, out_dir: Path, suppression: float) -> dict:
    qi = [x for a in ATTRS for x in ("--qi", f"{a}={DATA / f'adult_hierarchy_{a}.csv'}")]
    report = out_dir / "report.json"
    cmd = ["/usr/bin/time", "-f", "RSS_KB=%M", sys.executable, "-m", "fedanon", "anonymize", str(csv), *qi,
           "--k", "5", "--suppression", str(suppression), "--output", str(out_dir / "out.csv"),
           "--report", str(report), "--quiet"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"fedanon anonymize failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    rss_kb = int(next(l for l in proc.stderr.splitlines() if l.startswith("RSS_KB=")).split("=")[1])
    rep = json.loads(report.read_text())
    return {"wall_s": wall, "search_s": rep["elapsed_s"], "checks": rep["checks"], "peak_rss_mib": rss_kb / 1024,
            "transformation": list(rep["transformation"].values()), "suppressed": rep["suppressed_rows"],
            "optimum_found": rep["optimum_found"]}


def rows_sweep(sizes: list[float], suppressions: list[float], workdir: Path) -> list[dict]:
    header, rows, _ = load_adult()
    adult = EncodedTable.from_rows(header, rows)
    out = []
    for millions in sizes:
        n = int(round(millions * 1_000_000))
        csv = workdir / f"resampled_{n}.csv"
        t0 = time.perf_counter()
        write_csv(resample_codes(adult, n), csv)
        build_s = time.perf_counter() - t0
        for s in suppressions:
            r = run_cli(csv, workdir, s)
            r.update(rows=n, suppression=s, build_s=build_s, load=load_state(),
                     per_check_ms=1000 * r["search_s"] / max(r["checks"], 1),
                     end_to_end_over_search=r["wall_s"] / r["search_s"])
            out.append(r)
            print(f"  {n:>10,} rows s={s:.0%}: wall {r['wall_s']:.1f} s, search {r['search_s']:.1f} s, "
                  f"{r['checks']} checks, RSS {r['peak_rss_mib']:.0f} MiB (load {r['load']})", file=sys.stderr)
        csv.unlink()
    return out


def widened(table: EncodedTable, hier: dict[str, Hierarchy], n_qis: int):
    extra = COPIES[: n_qis - len(ATTRS)]
    names = [f"{a}-copy" for a in extra]
    idx = [table.column_index(a) for a in extra]
    wide = EncodedTable(list(table.columns) + names, np.hstack([table.codes, table.codes[:, idx]]),
                        [list(d) for d in table.dictionaries] + [list(table.dictionaries[i]) for i in idx])
    h = dict(hier)
    for new, old in zip(names, extra):
        h[new] = Hierarchy.from_rows(new, [[v.decode() for v in r] for r in hier[old].rows])
    return wide, h, ATTRS + names


def qis_sweep(counts: list[int], time_limit: float, node_budget: int) -> list[dict]:
    header, rows, hier = load_adult()
    table = EncodedTable.from_rows(header, rows)
    out = []
    for q in counts:
        wide, h, qis = widened(table, hier, q)
        config = AnonymizationConfig(qis, k=5)
        t0 = time.perf_counter()
        res = anonymize(wide, h, config, limits=SearchLimits(node_budget=node_budget, time_limit=time_limit))
        dt = time.perf_counter() - t0
        r = {"qis": q, "lattice": res.lattice_size, "time_s": dt, "checks": res.checks, "algorithm": res.algorithm,
             "optimum_found": res.optimum_found, "loss": res.information_loss,
             "loss_lower_bound": res.extra.get("loss_lower_bound", res.information_loss),
             "gap": res.extra.get("gap", 0.0), "transformation": list(res.transformation.values()),
             "load": load_state()}
        out.append(r)
        print(f"  {q} QIs ({r['lattice']:,} nodes): {dt:.1f} s, {r['checks']} checks, optimum_found "
              f"{r['optimum_found']}, gap {r['gap']:.2%} (load {r['load']})", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="0.3,1.2,4.8,12", help="row counts in millions (empty: skip)")
    ap.add_argument("--suppression", default="0,0.05", help="suppression limits")
    ap.add_argument("--qis", default="9,11,13,15", help="QI counts, 9..15 (empty: skip)")
    ap.add_argument("--time-limit", type=float, default=150.0, help="heuristic time limit for the QI sweep")
    ap.add_argument("--node-budget", type=int, default=DEFAULT_NODE_BUDGET)
    ap.add_argument("--workdir", default=None, help="where the resampled CSVs go (default: a temp dir)")
    ap.add_argument("--json", metavar="OUT.json", help="also write the results as JSON")
    args = ap.parse_args(argv)
    sizes = [float(x) for x in args.rows.split(",") if x]
    sups = [float(x) for x in args.suppression.split(",") if x]
    counts = [int(x) for x in args.qis.split(",") if x]
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        rows_res = rows_sweep(sizes, sups, Path(tmp)) if sizes else []
    qis_res = qis_sweep(counts, args.time_limit, args.node_budget) if counts else []

    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    print(f"\nrows (resampled ADULT, 9 QIs, k=5) — {machine}")
    print(f"{'rows':>11} {'supp':>5} {'wall s':>8} {'search s':>9} {'e2e/search':>10} {'checks':>7} "
          f"{'ms/check':>9} {'RSS MiB':>8} {'rows/s':>10}  load")
    for r in rows_res:
        print(f"{r['rows']:>11,} {r['suppression']:>5.0%} {r['wall_s']:>8.1f} {r['search_s']:>9.1f} "
              f"{r['end_to_end_over_search']:>10.2f} {r['checks']:>7} {r['per_check_ms']:>9.1f} "
              f"{r['peak_rss_mib']:>8.0f} {r['rows'] / r['wall_s']:>10,.0f}  {r['load']}")
    growth = []
    for s in sups:
        by_n = {r["rows"]: r for r in rows_res if r["suppression"] == s}
        if 1_200_000 in by_n and 4_800_000 in by_n:
            a, b = by_n[1_200_000], by_n[4_800_000]
            g = (b["per_check_ms"] / a["per_check_ms"]) / 4.0
            growth.append({"suppression": s, "per_check_growth_over_row_growth": g})
            print(f"per-check time 1.2 M -> 4.8 M rows (s={s:.0%}): x{b['per_check_ms'] / a['per_check_ms']:.2f} "
                  f"for x4 rows = {g:.2f} x the row growth")
    if qis_res:
        print(f"\nQIs (ADULT + copies, k=5, node budget {args.node_budget:,}, time limit {args.time_limit:g} s)")
        print(f"{'QIs':>4} {'nodes':>11} {'time s':>8} {'checks':>7} {'optimum':>8} {'gap':>7}  search")
        for r in qis_res:
            print(f"{r['qis']:>4} {r['lattice']:>11,} {r['time_s']:>8.1f} {r['checks']:>7} "
                  f"{str(r['optimum_found']):>8} {r['gap']:>7.2%}  {r['algorithm']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "rows": rows_res, "per_check_growth": growth,
                                               "qis": qis_res}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
