#!/usr/bin/env python3
"""The Dask workers' memory on a Parquet dataset: this source tree against a reference tree, one run.

    python3 bench/partition_memory.py --reference-tree DIR --rows 4.8 --workers 2 [--checks 0] [--json OUT.json]

Runs `bench/scale_probe.py` (ADULT resampled to `--rows` millions, 9 QIs, k = 5, 5 %
suppression, read by partition on a local cluster of `--workers` processes) first with the
package of `--reference-tree` (e.g. an export of an earlier revision: `git archive REV fedanon
bench | tar -x -C DIR`), then with this tree's, on the same dataset, back to back. Reported
per tree: each worker's peak RSS (VmHWM), their sum, the largest sampled sum, and per row of
the table; the ratio of this tree to the reference. What differs between the trees is the
code only (same data, same machine, minutes apart): the workers' baseline (interpreter, Dask,
NumPy) is in both, so the difference per row is what the partitions' layout saves.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def probe(tree: Path, args: argparse.Namespace) -> dict:
    """One `scale_probe.py` run with `tree`'s package (its own bench script too)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "probe.json"
        env = dict(os.environ, PYTHONPATH=str(tree))
        cmd = [sys.executable, str(tree / "bench" / "scale_probe.py"), "--rows", str(args.rows),
               "--workers", str(args.workers), "--checks", str(args.checks), "--data-dir", args.data_dir,
               "--sample", str(args.sample), "--json", str(out)]
        subprocess.run(cmd, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


def summary(run: dict) -> dict:
    peaks = run["workers_peak_rss_mib"]
    rows = run["rows"]
    return {"workers_peak_rss_mib": peaks, "workers_peak_sum_mib": sum(peaks),
            "workers_peak_sum_sampled_mib": run["workers_peak_sum_sampled_mib"],
            "bytes_per_row_at_peak": sum(peaks) * MIB / rows, "driver_peak_rss_mib": run["driver_peak_rss_mib"],
            "checks_done": run["checks_done"], "finished": run["finished"], "elapsed_s": run["elapsed_s"],
            "until_first_check_s": run["until_first_check_s"], "load": run["load"],
            "result": run.get("result")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference-tree", required=True, type=Path, help="a source tree with fedanon/ and bench/")
    ap.add_argument("--rows", type=float, default=4.8, help="rows in millions")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--checks", type=int, default=0, help="checks before stopping each search (0: whole search)")
    ap.add_argument("--data-dir", default="/tmp/fedanon_scale_data")
    ap.add_argument("--sample", type=float, default=0.5)
    ap.add_argument("--json", metavar="OUT.json")
    args = ap.parse_args(argv)
    reference = summary(probe(args.reference_tree.resolve(), args))
    this = summary(probe(ROOT, args))
    rows = int(round(args.rows * 1_000_000))
    saved = (reference["workers_peak_sum_mib"] - this["workers_peak_sum_mib"]) * MIB / rows
    print(f"{rows:,} rows, {args.workers} Dask workers, Parquet read on the workers")
    print(f"{'tree':<10} {'worker peaks (MiB)':>24} {'sum':>8} {'sampled sum':>12} {'B/row':>7} {'checks':>7} {'s':>7}")
    for name, s in (("reference", reference), ("this", this)):
        peaks = " ".join(f"{p:.0f}" for p in s["workers_peak_rss_mib"])
        print(f"{name:<10} {peaks:>24} {s['workers_peak_sum_mib']:>8.0f} {s['workers_peak_sum_sampled_mib']:>12.0f} "
              f"{s['bytes_per_row_at_peak']:>7.1f} {s['checks_done']:>7} {s['elapsed_s']:>7.1f}")
    ratio = this["workers_peak_sum_mib"] / reference["workers_peak_sum_mib"]
    print(f"this / reference, workers' summed peak: x{ratio:.2f} ({saved:.1f} bytes a row less)")
    timeless = [{k: v for k, v in (s["result"] or {}).items() if not k.endswith("_s")} for s in (reference, this)]
    same = timeless[0] == timeless[1] and reference["result"] is not None
    print(f"same result: {same}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "rows": rows, "workers": args.workers, "checks": args.checks, "reference": reference, "this": this,
            "ratio_workers_peak_sum": ratio, "bytes_per_row_saved_at_peak": saved, "same_result": same},
            indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
