#!/usr/bin/env python3
"""One very large search on Dask workers from Parquet, timed check by check, memory sampled.

    python3 bench/scale_probe.py --rows 100 --workers 2 [--checks 0] [--data-dir DIR] [--json OUT.json]

ADULT resampled to `--rows` millions (9 QIs, k = 5, 5 % suppression; the same chunks and seeds
as `bench/scale.py`, so a dataset it kept with `--data-dir` is reused) as a directory of Parquet
files, read by partition on a local Dask cluster of `--workers` processes (no row in the
driver), searched and written back by the workers (`anonymize_partitioned`). Measured: the
workers' read until the first check, the wall time of every check (and whether it grouped rows
or rolled up), the search, the output and the end-to-end time; the driver's peak RSS (its
VmHWM), each worker's peak RSS (VmHWM) and the largest sum of the workers' RSS seen by a
sampler every `--sample` seconds. `--checks N` stops the search after N checks (0: the whole
search). The JSON file is rewritten after every check (`finished` false until the end), so a
run stopped from outside leaves its partial numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scale import load_state, write_parquet_chunks  # noqa: E402
from bench.tables import ATTRS, DATA, load_adult  # noqa: E402
from fedanon.data.hierarchy import Hierarchy  # noqa: E402
from fedanon.engine import AnonymizationConfig, EncodedTable  # noqa: E402
from fedanon.engine.check.checker import LocalChecker  # noqa: E402
from fedanon.engine.partitioned import anonymize_partitioned  # noqa: E402

MIB = 1024


class Stop(Exception):
    """Raised from the timed checker after the probed checks."""


def _status_mib(pid: int, field: str) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / MIB
    except (OSError, ValueError):
        pass
    return 0.0


class Sampler(threading.Thread):
    """The workers' summed RSS (and the driver's) every `every` seconds; peaks kept."""

    def __init__(self, pids: list[int], every: float) -> None:
        super().__init__(daemon=True)
        self.pids, self.every = pids, every
        self.workers_peak_sum = 0.0
        self.driver_peak = 0.0
        self.hwm = {p: 0.0 for p in pids}
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(self.every):
            self.sample()

    def sample(self) -> None:
        self.workers_peak_sum = max(self.workers_peak_sum, sum(_status_mib(p, "VmRSS") for p in self.pids))
        self.driver_peak = max(self.driver_peak, _status_mib(os.getpid(), "VmRSS"))
        for p in self.pids:  # VmHWM of a worker is gone with it: read while it lives
            self.hwm[p] = max(self.hwm[p], _status_mib(p, "VmHWM"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=float, default=100.0, help="rows in millions")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--checks", type=int, default=0, help="checks before stopping the search (0: the whole search)")
    ap.add_argument("--data-dir", default="/tmp/fedanon_scale_data")
    ap.add_argument("--sample", type=float, default=1.0, help="seconds between memory samples")
    ap.add_argument("--keep-output", action="store_true", help="keep the output partitions (default: deleted)")
    ap.add_argument("--json", metavar="OUT.json")
    args = ap.parse_args(argv)
    import distributed

    n = int(round(args.rows * 1_000_000))
    folder = Path(args.data_dir) / f"resampled_{n}_parquet"
    out_dir = Path(args.data_dir) / "probe_out"
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
    sampler = Sampler(pids, args.sample)
    checks: list[dict] = []
    out: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
                 "rows": n, "workers": args.workers, "files": len(list(folder.glob("*.parquet"))),
                 "build_s": build_s, "finished": False}
    started = time.perf_counter()

    def record(final: bool = False) -> None:
        sampler.sample()
        times = [c["s"] for c in checks]
        out.update({
            "until_first_check_s": checks[0]["at_s"] - checks[0]["s"] if checks else None,
            "checks_done": len(checks), "checks_s_total": sum(times),
            "row_groupings": sum(1 for c in checks if c["grouped_rows"]),
            "mean_check_s": sum(times) / len(times) if times else None,
            "max_check_s": max(times) if times else None,
            "driver_peak_rss_mib": _status_mib(os.getpid(), "VmHWM"),
            "workers_peak_rss_mib": [sampler.hwm[p] for p in pids],
            "workers_peak_sum_sampled_mib": sampler.workers_peak_sum,
            "elapsed_s": time.perf_counter() - started, "load": load_state(), "checks": checks})
        text = json.dumps(out, indent=2) + "\n"
        if args.json:
            Path(args.json).write_text(text)
        if final:
            print(text)

    plain = LocalChecker.evaluate

    def timed(self: LocalChecker, levels: tuple[int, ...]):  # type: ignore[no-untyped-def]
        before, t = self.grouper.row_groupings, time.perf_counter()
        evaluation = plain(self, levels)
        now = time.perf_counter()
        checks.append({"levels": [int(x) for x in levels], "s": now - t, "at_s": now - started,
                       "grouped_rows": self.grouper.row_groupings > before, "anonymous": evaluation.anonymous})
        print(f"  check {len(checks)}: {now - t:.1f} s, {now - started:.0f} s since the start "
              f"({'rows' if checks[-1]['grouped_rows'] else 'roll-up'}; load {load_state()})",
              file=sys.stderr, flush=True)
        record()
        if args.checks and len(checks) >= args.checks:
            raise Stop
        return evaluation

    LocalChecker.evaluate = timed  # type: ignore[method-assign]
    sampler.start()
    try:
        result = anonymize_partitioned(folder, hier, config, out_dir, columns=None, client=client)
        out.update({"finished": True, "result": {k: v for k, v in result.to_report().items() if k != "output_files"}})
    except Stop:
        pass
    finally:
        LocalChecker.evaluate = plain  # type: ignore[method-assign]
        sampler.halt.set()
        record(final=True)
        client.close()
        cluster.close()
        if not args.keep_output:
            shutil.rmtree(out_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
