#!/usr/bin/env python3
"""Scale benchmark of the engine: rows (end to end through the CLI) and QIs (search space).

    python3 bench/scale.py [--rows 0.3,1.2,4.8,12] [--suppression 0,0.05] [--workers 1,2]
                           [--backend processes,dask] [--input csv,parquet]
                           [--repeat 1] [--compare-with OLD_SRC] [--qis 9,11,13,15]
                           [--time-limit 150] [--json OUT.json]

Rows: ADULT resampled (each attribute drawn from a different random row, seeded) to
each size in millions, 9 QIs, k = 5, each suppression limit and each `--workers`
value: `fedanon anonymize ... --report` is run as a child process (its resource usage
from `os.wait4`), so the figures are what a user sees: end-to-end wall time, CPU time of the process (user +
system, all threads: the figure to compare on a loaded machine), search time (the report's
`elapsed_s`: prepare, search and materialization), end-to-end / search (target
<= 1.5), checks, per-check time, peak RSS of the process (target <= 1.5 GB at 4.8 M
rows) and, with workers, the peak of the summed PSS of the process and its workers
(sampled every 0.2 s; PSS shares the partitions' shared memory out fairly). The
references measured in the same run: the search time itself (end-to-end / search),
the smallest row count (per-check growth relative to row growth), a parse floor (a
child that only starts Python, imports pyarrow and parses the CSV into string columns:
(floor + search) / search is the least end-to-end / search any run can reach), one worker
against several (runs alternate, `--repeat` rounds) and, with `--compare-with
OLD_SRC`, the CLI of another source tree (e.g. a `git worktree` of an older
commit) run alternately with this one on the same file (same transformation asserted).

Backends: every `--backend` x `--workers` x `--input` runs on the same rows, alternately
(`processes` with one worker is the one-process reference; same transformation and
suppressed rows asserted across all). `dask` starts a local Dask cluster of N worker
processes on loopback inside the command; with `--input parquet` the rows are a directory
of Parquet files that the workers read by partition (no row in the driver) and the output
is written by partition. Per run: rows/s per check (rows / (search / checks)), search time
(the report's time less the start of the backend's workers and, for Parquet read on the
workers, less reading), the start, end to end, the peak RSS of the driver process alone
(`VmHWM`) and the peak summed PSS of its workers (sampled every 0.2 s).

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
from fedanon.engine.search.heuristic import DEFAULT_NODE_BUDGET, SearchLimits  # noqa: E402

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


CHUNK_ROWS = 4_000_000  # rows resampled (and written) at a time: 100 M rows never sit in memory at once


def chunks(adult: EncodedTable, n: int):
    """The n resampled rows as tables of at most CHUNK_ROWS, each from its own seed."""
    for i, start in enumerate(range(0, n, CHUNK_ROWS)):
        yield resample_codes(adult, min(CHUNK_ROWS, n - start), seed=20240601 + i)


def write_csv_chunks(adult: EncodedTable, n: int, path: Path) -> None:
    first = True
    for part in chunks(adult, n):
        if first:
            write_csv(part, path)
            first = False
        else:
            tail = path.with_suffix(".part")
            write_csv(part, tail)
            with open(path, "ab") as out, open(tail, "rb") as fh:
                fh.readline()  # header
                while block := fh.read(1 << 24):
                    out.write(block)
            tail.unlink()


def write_parquet_chunks(adult: EncodedTable, n: int, folder: Path, row_group: int = 1_000_000) -> None:
    """One Parquet file per chunk (dictionary-encoded text columns, row groups of `row_group`); the
    folder's `done` file marks a complete dataset."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(chunks(adult, n)):
        arrays = [pa.DictionaryArray.from_arrays(pa.array(part.codes[:, c]),
                                                 pa.array([v.decode() for v in part.dictionaries[c]], type=pa.string()))
                  for c in range(len(part.columns))]
        pq.write_table(pa.table(arrays, names=part.columns), folder / f"part-{i:04d}.parquet", row_group_size=row_group)


def load_state() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _hwm_kib(pid: int) -> int:
    """Peak RSS of one process alone (VmHWM; 0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except (OSError, ValueError):
        pass
    return out


def _tree_pss_kib(pid: int, skip_root: bool = False) -> int:
    """PSS of a process and all its descendants (shared pages divided among their users);
    `skip_root`: of the descendants only (the workers of a driver)."""
    total, todo = 0, ([c for c in _children(pid)] if skip_root else [pid])
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


def run_cli(csv: Path, out_dir: Path, suppression: float, workers: int = 1, src: Path = ROOT,
            backend: str = "processes") -> dict:
    """One `fedanon anonymize` run of the source tree `src` as a child process, measured.

    `csv`: the input, a CSV file or (with backend dask) a directory of Parquet files."""
    qi = [x for a in ATTRS for x in ("--qi", f"{a}={DATA / f'adult_hierarchy_{a}.csv'}")]
    report = out_dir / "report.json"
    partitioned = csv.is_dir()
    output = out_dir / ("out_parts" if partitioned else "out.csv")
    cmd = [sys.executable, "-m", "fedanon", "anonymize", str(csv), *qi,
           "--k", "5", "--suppression", str(suppression), "--output", str(output),
           "--report", str(report), "--quiet"] + (["--workers", str(workers)] if workers != 1 or backend != "processes"
                                                  else []) + (["--backend", backend] if backend != "processes" else [])
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=src,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))})
    peak_pss, peak_workers, driver_hwm, usage, sampled = 0, 0, 0, None, 0.0
    while True:  # reaped here, so the child's own rusage (what GNU time reports) is ours
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            wall = time.perf_counter() - t0
            proc.returncode, usage = os.waitstatus_to_exitcode(status), rusage
            break
        if time.perf_counter() - sampled >= 0.2:  # PSS every 0.2 s; the exit is seen within 10 ms
            peak_pss = max(peak_pss, _tree_pss_kib(proc.pid))
            peak_workers = max(peak_workers, _tree_pss_kib(proc.pid, skip_root=True))
            driver_hwm = max(driver_hwm, _hwm_kib(proc.pid))
            sampled = time.perf_counter()
        time.sleep(0.01)
    _out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"fedanon anonymize failed ({proc.returncode}): {err.strip()[-500:]}")
    rss_kb = usage.ru_maxrss  # KiB on Linux
    cpu_s = usage.ru_utime + usage.ru_stime  # user + system, threads and reaped workers included
    rep = json.loads(report.read_text())
    if partitioned:
        start_s = rep["load_s"]
        search_s = rep["search_s"] + rep["output_s"]
    else:
        start_s = rep.get("backend_start_s", 0.0)
        search_s = rep["elapsed_s"] - start_s
    if output.is_dir():
        for f in output.iterdir():
            f.unlink()
    return {"wall_s": wall, "cpu_s": cpu_s, "search_s": search_s, "start_s": start_s, "elapsed_s": rep["elapsed_s"],
            "checks": rep["checks"], "peak_rss_mib": rss_kb / 1024, "driver_peak_rss_mib": driver_hwm / 1024,
            "workers_peak_pss_mib": peak_workers / 1024,
            "peak_tree_pss_mib": peak_pss / 1024, "workers": workers, "backend": backend,
            "input": "parquet" if partitioned else "csv",
            "row_groupings": rep.get("row_groupings"),
            "transformation": list(rep["transformation"].values()), "suppressed": rep["suppressed_rows"],
            "optimum_found": rep["optimum_found"]}


# A lower bound of any CLI run on the file: start Python, import pyarrow and parse the CSV
# into plain string columns (no dictionary encoding, nothing else), in a child process.
_PARSE_FLOOR = """
import sys
import pyarrow as pa, pyarrow.csv as c
names = open(sys.argv[1], encoding="utf-8").readline().rstrip("\\n").split(";")
c.read_csv(sys.argv[1], parse_options=c.ParseOptions(delimiter=";"),
           convert_options=c.ConvertOptions(column_types={n: pa.string() for n in names}))
"""


def parse_floor(csv: Path) -> float:
    """Wall seconds of `_PARSE_FLOOR` on `csv`: what no CLI run can go below (before searching)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", _PARSE_FLOOR, str(csv)], check=True)
    return time.perf_counter() - t0


def rows_sweep(sizes: list[float], suppressions: list[float], workdir: Path, workers: list[int] = (1,),
               repeat: int = 1, compare_with: Path | None = None, backends: list[str] = ("processes",),
               inputs: list[str] = ("csv",), chosen: list[tuple[str, str, int]] | None = None,
               data_dir: Path | None = None) -> list[dict]:
    header, rows, _ = load_adult()
    adult = EncodedTable.from_rows(header, rows)
    out = []
    variants = [(w, "this", ROOT, b, i) for b in backends for i in inputs for w in workers
                if not (i == "parquet" and b != "dask")]  # Parquet read on the workers: the dask backend
    if chosen:
        variants = [(w, "this", ROOT, b, i) for b, i, w in chosen]
    if ("processes", "csv") in {(b, i) for _w, _t, _s, b, i in variants} and 1 not in workers:
        variants.insert(0, (1, "this", ROOT, "processes", "csv"))  # the one-process reference
    variants += [(1, "reference", compare_with, "processes", "csv")] if compare_with else []
    for millions in sizes:
        n = int(round(millions * 1_000_000))
        csv = (data_dir or workdir) / f"resampled_{n}.csv"
        folder = (data_dir or workdir) / f"resampled_{n}_parquet"
        t0 = time.perf_counter()
        if any(v[4] == "csv" for v in variants) and not (data_dir and csv.exists()):
            write_csv_chunks(adult, n, csv)
        if any(v[4] == "parquet" for v in variants) and not (data_dir and (folder / "done").exists()):
            write_parquet_chunks(adult, n, folder)
            (folder / "done").write_text("")
        build_s = time.perf_counter() - t0
        for s in suppressions:
            for round_ in range(repeat):
                floor_s = parse_floor(csv) if csv.exists() else float("nan")  # once a round, same load pattern
                for w, tree, src, backend, kind in variants:  # alternating: every variant sees the same load pattern
                    r = run_cli(folder if kind == "parquet" else csv, workdir, s, w, src, backend)
                    r.update(rows=n, suppression=s, build_s=build_s, load=load_state(), tree=tree, round=round_,
                             per_check_ms=1000 * r["search_s"] / max(r["checks"], 1),
                             rows_per_s_per_check=n * max(r["checks"], 1) / max(r["search_s"], 1e-9),
                             end_to_end_over_search=r["wall_s"] / r["search_s"], parse_floor_s=floor_s,
                             floor_over_search=(floor_s + r["search_s"]) / r["search_s"])
                    same = [x for x in out if x["rows"] == n and x["suppression"] == s]
                    if same and (same[0]["transformation"], same[0]["suppressed"]) != (r["transformation"],
                                                                                    r["suppressed"]):
                        raise SystemExit(f"different result: {tree} {backend} {kind} workers={w} vs the first run "
                                         f"at {n} rows, s={s}")
                    out.append(r)
                    print(f"  {n:>10,} rows s={s:.0%} {tree} {backend}/{kind} workers={w}: wall {r['wall_s']:.1f} s, "
                          f"start {r['start_s']:.1f} s, search {r['search_s']:.1f} s, {r['checks']} checks, driver "
                          f"{r['driver_peak_rss_mib']:.0f} MiB, workers {r['workers_peak_pss_mib']:.0f} MiB "
                          f"(load {r['load']})", file=sys.stderr, flush=True)
        if data_dir is not None:
            continue  # kept for the next run
        if csv.exists():
            csv.unlink()
        if folder.exists():
            for f in folder.iterdir():
                f.unlink()
            folder.rmdir()
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
    ap.add_argument("--workers", default="1", help="--workers values to run alternately, e.g. 1,2")
    ap.add_argument("--backend", default="processes", help="backends to run alternately: processes,dask")
    ap.add_argument("--variants", default="", help="instead of --backend x --input x --workers: a list of "
                                                    "BACKEND/INPUT:WORKERS, e.g. processes/csv:1,dask/parquet:2")
    ap.add_argument("--input", default="csv", help="inputs: csv (read whole by the driver), parquet (a directory "
                                                     "of files read by the dask workers)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the alternating runs (take the best)")
    ap.add_argument("--compare-with", metavar="OLD_SRC", default=None,
                    help="also run the CLI of this source tree (a checkout of an older commit), alternately")
    ap.add_argument("--qis", default="9,11,13,15", help="QI counts, 9..15 (empty: skip)")
    ap.add_argument("--time-limit", type=float, default=150.0, help="heuristic time limit for the QI sweep")
    ap.add_argument("--node-budget", type=int, default=DEFAULT_NODE_BUDGET)
    ap.add_argument("--workdir", default=None, help="where the resampled CSVs go (default: a temp dir)")
    ap.add_argument("--data-dir", default=None, help="generate the resampled tables here and keep them "
                                                     "(reused when present) instead of a temporary folder")
    ap.add_argument("--json", metavar="OUT.json", help="also write the results as JSON")
    args = ap.parse_args(argv)
    sizes = [float(x) for x in args.rows.split(",") if x]
    sups = [float(x) for x in args.suppression.split(",") if x]
    counts = [int(x) for x in args.qis.split(",") if x]
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        rows_res = rows_sweep(sizes, sups, Path(tmp), [int(w) for w in args.workers.split(",") if w], args.repeat,
                              Path(args.compare_with).resolve() if args.compare_with else None,
                              [b for b in args.backend.split(",") if b],
                              [i for i in args.input.split(",") if i],
                              [(v.split("/")[0], v.split("/")[1].split(":")[0], int(v.split(":")[1]))
                               for v in args.variants.split(",") if v],
                              Path(args.data_dir) if args.data_dir else None) if sizes else []
    qis_res = qis_sweep(counts, args.time_limit, args.node_budget) if counts else []

    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    print(f"\nrows (resampled ADULT, 9 QIs, k=5) — {machine}; targets: e2e/search <= 1.5, RSS <= 1536 MiB at 4.8 M")
    print(f"{'rows':>11} {'supp':>5} {'backend':>9} {'input':>7} {'wrk':>3} {'wall s':>8} {'start s':>7} {'search s':>9} "
          f"{'checks':>7} {'ms/check':>9} {'rows/s/check':>13} {'driver MiB':>10} {'workers MiB':>11} {'cpu s':>7}  load")
    for r in rows_res:
        print(f"{r['rows']:>11,} {r['suppression']:>5.0%} {r['backend']:>9} {r['input']:>7} {r['workers']:>3} "
              f"{r['wall_s']:>8.1f} {r['start_s']:>7.1f} {r['search_s']:>9.1f} {r['checks']:>7} {r['per_check_ms']:>9.1f} "
              f"{r['rows_per_s_per_check']:>13,.0f} {r['driver_peak_rss_mib']:>10.0f} {r['workers_peak_pss_mib']:>11.0f} "
              f"{r['cpu_s']:>7.1f}  {r['load']}")
    if rows_res:
        print("start s: the backend's workers started and given their rows (Parquet: read by the workers); search s: "
              "the rest of the report's time (search and output); driver MiB: peak RSS of the command's own process; "
              "workers MiB: peak summed PSS of its worker processes")
    best: dict[tuple, dict] = {}
    for r in rows_res:  # best of the rounds per configuration
        key = (r["rows"], r["suppression"], r["tree"], r["backend"], r["input"], r["workers"])
        if key not in best or r["wall_s"] < best[key]["wall_s"]:
            best[key] = r
    growth = []
    for s in sups:
        by_n = {k[0]: r for k, r in best.items() if k[1] == s and k[2:] == ("this", "processes", "csv", 1)}
        if 1_200_000 in by_n and 4_800_000 in by_n:
            a, b = by_n[1_200_000], by_n[4_800_000]
            g = (b["per_check_ms"] / a["per_check_ms"]) / 4.0
            growth.append({"suppression": s, "per_check_growth_over_row_growth": g})
            print(f"per-check time 1.2 M -> 4.8 M rows (s={s:.0%}): x{b['per_check_ms'] / a['per_check_ms']:.2f} "
                  f"for x4 rows = {g:.2f} x the row growth")
    ratios = []
    for (n, s, tree, backend, kind, w), r in sorted(best.items()):
        one = best.get((n, s, "this", "processes", "csv", 1))
        same_one = best.get((n, s, tree, backend, kind, 1))  # the same backend with one worker
        if one is not None and r is not one:
            ratio = {"rows": n, "suppression": s, "variant": f"{tree} {backend}/{kind} workers={w}",
                     "search_over_one_process": r["search_s"] / one["search_s"],
                     "wall_over_one_process": r["wall_s"] / one["wall_s"],
                     "search_speedup_over_one_worker": (same_one["search_s"] / r["search_s"]) if same_one else None,
                     "wall_speedup_over_one_worker": (same_one["wall_s"] / r["wall_s"]) if same_one else None}
            ratios.append(ratio)
            print(f"{n:>11,} rows s={s:.0%}: {ratio['variant']} (best of {args.repeat}): search "
                  f"x{ratio['search_over_one_process']:.2f} of one process, wall x{ratio['wall_over_one_process']:.2f}"
                  + (f"; speed-up against 1 worker of the same backend: search x{ratio['search_speedup_over_one_worker']:.2f}, "
                     f"wall x{ratio['wall_speedup_over_one_worker']:.2f}" if same_one and same_one is not r else ""))
    if qis_res:
        print(f"\nQIs (ADULT + copies, k=5, node budget {args.node_budget:,}, time limit {args.time_limit:g} s)")
        print(f"{'QIs':>4} {'nodes':>11} {'time s':>8} {'checks':>7} {'optimum':>8} {'gap':>7}  search")
        for r in qis_res:
            print(f"{r['qis']:>4} {r['lattice']:>11,} {r['time_s']:>8.1f} {r['checks']:>7} "
                  f"{str(r['optimum_found']):>8} {r['gap']:>7.2%}  {r['algorithm']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "rows": rows_res, "per_check_growth": growth,
                                               "ratios": ratios, "qis": qis_res}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
