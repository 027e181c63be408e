#!/usr/bin/env python3
"""Probe a row count too large to search in full here: load it on Dask workers, time the first checks.

    python3 bench/scale_probe.py --rows 100 --workers 2 [--checks 12] [--data-dir DIR] [--json OUT.json]

ADULT resampled to `--rows` millions (9 QIs, k = 5, 5 % suppression; the same chunks and seeds
as `bench/scale.py`, so a dataset it kept with `--data-dir` is reused) as a directory of Parquet
files, read by partition on a local Dask cluster of `--workers` processes (no row in the
driver). Measured: generating the files, the workers' read (wall time), the peak RSS of the
driver and the summed RSS of the workers after the read and at the end, and the wall time of each of the
search's first `--checks` checks, after which the search is stopped. The full search's time is
then *projected*: per-check time x the checks the same search needs at 12 M rows (from a
`bench/scale.py` results file given with `--checks-from`, else not projected). Why a probe: on
a loaded 2-core machine the full search on 100 M rows takes longer than a session has.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scale import load_state, write_parquet_chunks  # noqa: E402
from bench.tables import ATTRS, DATA, load_adult  # noqa: E402
from fedanon.data.hierarchy import Hierarchy  # noqa: E402
from fedanon.engine import AnonymizationConfig, EncodedTable  # noqa: E402
from fedanon.engine.partitioned import anonymize_partitioned  # noqa: E402


class Stop(Exception):
    """Raised from the progress callback after the probed checks."""


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=float, default=100.0, help="rows in millions")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--checks", type=int, default=12, help="checks to time before stopping the search")
    ap.add_argument("--checks-from", default=None, help="a bench/scale.py results JSON: its checks project the search")
    ap.add_argument("--data-dir", default="/tmp/fedanon_scale_data")
    ap.add_argument("--json", metavar="OUT.json")
    args = ap.parse_args(argv)
    import distributed

    n = int(round(args.rows * 1_000_000))
    folder = Path(args.data_dir) / f"resampled_{n}_parquet"
    t0 = time.perf_counter()
    if not (folder / "done").exists():
        header, rows, _ = load_adult()
        write_parquet_chunks(EncodedTable.from_rows(header, rows), n, folder)
        (folder / "done").write_text("")
    build_s = time.perf_counter() - t0
    hier = {a: Hierarchy.read_csv(DATA / f"adult_hierarchy_{a}.csv", a) for a in ATTRS}
    config = AnonymizationConfig(ATTRS, k=5, suppression=0.05)
    cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, host="127.0.0.1",
                                       dashboard_address=None, memory_limit=0)
    client = distributed.Client(cluster)
    pids = list(client.run(os.getpid).values())
    marks: list[float] = []
    peaks = {"workers_after_first_check_mib": 0.0, "workers_peak_mib": 0.0}

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        if not marks:  # the first check: the read, the dictionaries and the partitions are done
            peaks["workers_after_first_check_mib"] = sum(_rss_mib(p) for p in pids)
        marks.append(now)
        peaks["workers_peak_mib"] = max(peaks["workers_peak_mib"], sum(_rss_mib(p) for p in pids))
        print(f"  check {len(marks)}: {now - started:.1f} s since the start (load {load_state()})",
              file=sys.stderr, flush=True)
        if len(marks) > args.checks:
            raise Stop

    started = time.perf_counter()
    try:
        anonymize_partitioned(folder, hier, config, Path(args.data_dir) / "probe_out", columns=None, client=client,
                              progress=progress)
        finished = True
    except Stop:
        finished = False
    finally:
        client.close()
        cluster.close()
    first_s = marks[0] - started if marks else None
    per_check = [b - a for a, b in zip(marks, marks[1:])]
    per_check_s = sum(per_check) / len(per_check) if per_check else None
    projected = None
    if args.checks_from and per_check_s:
        runs = json.loads(Path(args.checks_from).read_text())["rows"]
        checks = max(r["checks"] for r in runs)
        projected = {"checks_at_12m": checks, "search_s": checks * per_check_s}
    out = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
           "rows": n, "workers": args.workers, "build_s": build_s, "until_first_check_s": first_s,
           "checks_timed": len(per_check), "per_check_s": per_check, "mean_per_check_s": per_check_s,
           "finished": finished, "driver_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           **peaks, "projected": projected, "load": load_state()}
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
