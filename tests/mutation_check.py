"""Inject the faults of issue 15's "Must show" into a scratch copy and confirm the tests fail.

    python tests/mutation_check.py [--thorough] [--only NAME]

For each fault: copy the tracked files of this checkout to a temporary folder, apply
one textual change (it must match exactly once, else the check reports the pattern
as stale), run the named tests of the default suite in the copy (its own `fedanon`
first on PYTHONPATH), and expect a failure. The fast run uses the hand-computed
metric tests, the reference comparisons on the example data and the equivalence
tests (≈ 1 min per fault on a loaded 2-core machine); `--thorough` also runs the
property tests against the reference (several minutes per fault). Exit status 0
iff every fault was caught. Not collected by pytest (file name has no test_ prefix).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAST = ["tests/test_reference.py"]
PROPERTY = ["tests/test_reference_property.py"]

# (name, file, old text, new text, tests that must fail)
MUTATIONS: list[tuple[str, str, str, str, list[str]]] = [
    ("loss: suppression term x1.5", "fedanon/model/metrics/classic.py",
     "return base + (s * self.q - math.fsum(removed)) / (ctx.n_rows * self.q)",
     "return base + 1.5 * (s * self.q - math.fsum(removed)) / (ctx.n_rows * self.q)", FAST),
    ("precision: suppressed cell cost x1.5", "fedanon/model/metrics/classic.py",
     "return ((n - s) * per_row + s * 1.0) / n",
     "return ((n - s) * per_row + s * 1.5) / n", FAST),
    ("non-uniform entropy: suppression term x1.5", "fedanon/model/metrics/classic.py",
     "extra.append(_fsum(self._term(counts, np.full_like(counts, total))))",
     "extra.append((1.5 if self.name == 'nonuniform-entropy' else 1.0)"
     " * _fsum(self._term(counts, np.full_like(counts, total))))", FAST),
    ("discernibility: suppressed classes x1.5", "fedanon/model/metrics/classic.py",
     "self.ctx.n_rows * int(s[failing].sum()))",
     "1.5 * self.ctx.n_rows * int(s[failing].sum()))", FAST),
    ("AECS: class of suppressed rows x1.5", "fedanon/model/metrics/classic.py",
     "n_cls = ok + (1 if failing.any() else 0)",
     "n_cls = ok + (1.5 if failing.any() else 0)", FAST),
    ("k-anonymity: size > k", "fedanon/model/criterion.py",
     "return stats.sizes >= self.k", "return stats.sizes > self.k", FAST),
    ("k-anonymity: size >= k - 1", "fedanon/model/criterion.py",
     "return stats.sizes >= self.k", "return stats.sizes >= self.k - 1", FAST),
    ("demo: output missing one column in the comparison", "fedanon/cli/demo.py",
     'problems = differences(central, summary.get("transformation"), sim.columns, sim.rows)',
     'problems = differences(central, summary.get("transformation"), sim.columns[1:], '
     '[row[1:] for row in sim.rows])',
     ["tests/test_equivalence.py::test_demo_example_in_memory_reports_ok"]),
]


def scratch_copy() -> Path:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    dest = Path(tempfile.mkdtemp(prefix="fedanon-mutant-"))
    for name in files:
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def check(name: str, path: str, old: str, new: str, tests: list[str]) -> tuple[str, float]:
    copy = scratch_copy()
    try:
        target = copy / path
        text = target.read_text(encoding="utf-8")
        if text.count(old) != 1:
            return f"STALE PATTERN ({text.count(old)} matches in {path})", 0.0
        target.write_text(text.replace(old, new), encoding="utf-8")
        env = dict(os.environ, PYTHONPATH=str(copy))
        probe = subprocess.run([sys.executable, "-c", "import fedanon; print(fedanon.__file__)"], cwd=copy,
                               env=env, capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(copy)):
            return f"SETUP ERROR: imported {probe.stdout.strip()!r}, not the mutant", 0.0
        start = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
                             cwd=copy, env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        tail = [line for line in run.stdout.splitlines() if line.startswith("FAILED")][:1]
        if run.returncode == 1:
            return "caught: " + (tail[0] if tail else "tests failed"), elapsed
        if run.returncode == 0:
            return "NOT CAUGHT (all tests passed)", elapsed
        return f"ERROR (pytest exit {run.returncode}): {run.stdout[-300:]}", elapsed
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--thorough", action="store_true", help="also run the property tests against the reference")
    parser.add_argument("--only", help="run only the faults whose name contains this text")
    args = parser.parse_args()
    ok = True
    for name, path, old, new, tests in MUTATIONS:
        if args.only and args.only not in name:
            continue
        suites = [tests] + ([PROPERTY] if args.thorough and tests == FAST else [])
        for suite in suites:
            verdict, elapsed = check(name, path, old, new, suite)
            ok &= verdict.startswith("caught")
            print(f"{name:52s} {' '.join(suite):60s} {elapsed:6.1f} s  {verdict}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
