"""Runs of the `fedanon anonymize` CLI in fresh processes: wall time and peak RSS, with and without the report.

Why a fresh process per run: peak RSS is a high-water mark of a whole process, so
runs sharing one would hide each other's peaks; and a steward's run is exactly this
(read the CSV files, search, write the output, and with `--report` / `--html` build
the report). The peak is the child's `ru_maxrss` from `os.wait4` (Linux: KiB).

`TableFiles` writes a table and its hierarchies as the CSV files the CLI reads;
`cli_args` turns an `AnonymizationConfig` into the CLI's flags, so the bench's
in-process configurations run unchanged through the CLI. Each run is started by a small
launcher process (`LAUNCHER`), not forked from the benchmark itself (see there why).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy
from fedanon.data.io.delimited import write_columns

ROOT = Path(__file__).resolve().parent.parent

# what a run adds to the plain anonymization: nothing, the JSON report, the JSON and the HTML report
VARIANTS = {"plain": [], "report": ["--report", "{dir}/r.json"],
            "html": ["--report", "{dir}/r.json", "--html", "{dir}/r.html"]}


@dataclass
class TableFiles:
    """A table as CSV files in `directory`: the table, one hierarchy per attribute, a research subset."""

    table: Path
    hierarchies: dict[str, Path]
    subset: Path | None = None

    @classmethod
    def write(cls, directory: Path, table: EncodedTable, hierarchies: dict[str, Hierarchy],
              subset: np.ndarray | None = None) -> "TableFiles":
        directory.mkdir(parents=True, exist_ok=True)
        codes = [table.codes[:, c] for c in range(len(table.columns))]
        write_columns(directory / "table.csv", table.columns, codes, table.dictionaries)
        paths = {}
        for attr, hier in hierarchies.items():
            paths[attr] = directory / f"hierarchy_{attr}.csv"
            hier.write_csv(paths[attr])
        subset_path = None
        if subset is not None:
            subset_path = directory / "subset.csv"
            write_columns(subset_path, table.columns, codes, table.dictionaries, rows=np.flatnonzero(subset))
        return cls(directory / "table.csv", paths, subset_path)


def cli_args(config: AnonymizationConfig, files: TableFiles) -> list[str]:
    """The `fedanon anonymize` flags of `config` on `files` (input, models, suppression, metric)."""
    args = [str(files.table)]
    for q in config.quasi_identifiers:
        args += ["--qi", f"{q}={files.hierarchies[q]}"]
    for s in config.sensitive_attributes:
        args += ["--sensitive", f"{s}={files.hierarchies[s]}" if s in files.hierarchies else s]
    if config.k > 1:
        args += ["--k", str(config.k)]
    ld = config.l_diversity
    if ld is not None:
        args += ["--l-diversity", f"recursive:{ld.c:g},{ld.l:g}" if ld.variant == "recursive" else f"{ld.variant}:{ld.l:g}"]
    tc = config.t_closeness
    if tc is not None:
        args += ["--t-closeness", f"{tc.t:g}:{tc.kind}"]
    dp = config.delta_presence
    if dp is not None:
        assert files.subset is not None, "δ-presence needs the research subset's file"
        args += ["--delta-presence", f"{dp.dmin:g},{dp.dmax:g}:{files.subset}"]
    return args + ["--suppression", f"{config.suppression:g}", "--metric", config.metric, "--quiet"]


# Runs the command given as its arguments and prints the child's exit code, CPU time and peak
# RSS as JSON. Why a launcher: on exec Linux records the replaced image's peak RSS as the new
# program's, so a child forked from the big benchmark process would report at least the
# benchmark's size; forked from this small interpreter, it reports its own peak.
LAUNCHER = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "cpu_s": usage.ru_utime + usage.ru_stime,
                  "peak_rss_kib": usage.ru_maxrss}))
"""


def fresh_run(args: list[str], variant: str, work: Path, src: Path = ROOT) -> dict:
    """One CLI run in a new process of the `fedanon` in source tree `src`: wall time, CPU time
    (user + system, all its threads: what a loaded shared machine inflates least), peak RSS
    (MiB), and the transformation the report states (where it writes one)."""
    extra = [a.format(dir=work) for a in VARIANTS[variant]]
    env = dict(os.environ, PYTHONPATH=str(src))
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", LAUNCHER, sys.executable, "-m", "fedanon", "anonymize", *args,
                               "-o", str(work / "out.csv"), *extra], cwd=src, env=env, stdout=subprocess.PIPE,
                              stderr=err, check=False)
        wall = time.perf_counter() - t0
        err.seek(0)
        message = err.read().decode(errors="replace")[-2000:]
    usage = json.loads(proc.stdout.decode().strip().splitlines()[-1]) if proc.returncode == 0 else {"rc": None}
    if usage["rc"] != 0:
        raise SystemExit(f"fedanon anonymize failed ({usage['rc']}): {message}")
    out = {"wall_s": wall, "cpu_s": usage["cpu_s"], "peak_rss_mib": usage["peak_rss_kib"] / 1024}
    if variant != "plain":
        out["transformation"] = json.loads((work / "r.json").read_text())["transformation"]
    return out


def fresh_runs(config: AnonymizationConfig, files: TableFiles, repeat: int = 1,
               variants: tuple[str, ...] = ("plain", "report", "html"), src: Path = ROOT) -> dict[str, dict]:
    """Each variant `repeat` times, interleaved (a load spike hits all alike): min wall and CPU time, max peak RSS."""
    args = cli_args(config, files)
    best: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="fedanon_fresh_") as tmp:
        for _ in range(repeat):
            for v in variants:
                r = fresh_run(args, v, Path(tmp), src)
                if v not in best:
                    best[v] = r
                else:
                    best[v]["wall_s"] = min(best[v]["wall_s"], r["wall_s"])
                    best[v]["cpu_s"] = min(best[v]["cpu_s"], r["cpu_s"])
                    best[v]["peak_rss_mib"] = max(best[v]["peak_rss_mib"], r["peak_rss_mib"])
    return best
