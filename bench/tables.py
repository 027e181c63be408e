"""Benchmark tables built deterministically from the bundled ADULT data.

* `load_adult()`: ADULT (30,162 rows) with its nine QI hierarchies.
* `resample(...)`: n rows, each attribute drawn from a different random row (seeded),
  so a copy is not trivially k-anonymous; used for the scale benchmark.
* `highcard(...)`: ADULT plus a ZIP-like QI with ≈ 13,500 distinct values (5 digits,
  hierarchy 12345 → 1234* → … → *****) and a numeric sensitive attribute with ≈ 800
  distinct values (hierarchy value → band of 10 → band of 100 → *), correlated with
  salary-class -- the shape of table on which ℓ-diversity and t-closeness used to be
  8–22× slower than k-anonymity (issue 14). Not tuned to: built once, seeded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import fedanon
from fedanon.engine import EncodedTable, Hierarchy
from fedanon.data.io.delimited import read_table_csv

DATA = Path(fedanon.__file__).parent / "data" / "adult"
ATTRS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
         "occupation", "salary-class"]
HIGHCARD_QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "zip"]
SENSITIVE = "income"


def load_adult() -> tuple[list[str], list[list[str]], dict[str, Hierarchy]]:
    header, rows = read_table_csv(DATA / "adult.csv")
    hier = {a: Hierarchy.read_csv(DATA / f"adult_hierarchy_{a}.csv", a) for a in ATTRS}
    return header, rows, hier


def resample(header: list[str], rows: list[list[str]], n: int, seed: int = 20240601) -> list[list[str]]:
    """Each attribute drawn from an independent random row: a plain copy would be trivially k-anonymous."""
    rng = np.random.default_rng(seed)
    cols = list(zip(*rows))
    picks = [rng.integers(0, len(rows), size=n) for _ in header]
    return [list(r) for r in zip(*[[cols[c][i] for i in picks[c]] for c in range(len(header))])]


def resample_codes(table: EncodedTable, n: int, seed: int = 20240601) -> EncodedTable:
    """`resample` on the code matrix (no per-row Python lists): for millions of rows."""
    rng = np.random.default_rng(seed)
    codes = np.empty((n, len(table.columns)), dtype=np.int32)
    for c in range(len(table.columns)):
        codes[:, c] = table.codes[rng.integers(0, table.n_rows, size=n), c]
    return EncodedTable(list(table.columns), codes, [list(d) for d in table.dictionaries])


def highcard(seed: int = 20261123, income_levels: int = 4) -> tuple[EncodedTable, dict[str, Hierarchy]]:
    """ADULT + `zip` (QI, ≈ 13,500 values) + `income` (sensitive, ≈ 800 values).

    `income_levels`: levels of income's interval hierarchy, 4 (value, bands of 10 and 100, *)
    or 5 (value, bands of 10, 50 and 200, *); the rows are the same either way."""
    header, rows, hier = load_adult()
    rng = np.random.default_rng(seed)
    n = len(rows)
    candidates = np.sort(rng.choice(np.arange(10000, 100000), size=16000, replace=False))
    zips = [f"{z:05d}" for z in candidates[rng.integers(0, candidates.size, size=n)]]
    rich = np.array([r[header.index("salary-class")] == ">50K" for r in rows])
    income = np.where(rich, rng.normal(520, 130, size=n), rng.gamma(3.0, 70.0, size=n))
    income = np.clip(np.round(income), 0, 799).astype(np.int64)
    out_rows = [r + [z, str(v)] for r, z, v in zip(rows, zips, income.tolist())]
    table = EncodedTable.from_rows(header + ["zip", SENSITIVE], out_rows)
    used_zips = sorted(set(zips))
    hier = dict(hier)
    hier["zip"] = Hierarchy.from_rows("zip", [[z] + [z[:5 - i] + "*" * i for i in range(1, 6)] for z in used_zips])
    values = sorted(set(income.tolist()))
    widths = {4: (10, 100), 5: (10, 50, 200)}[income_levels]
    hier[SENSITIVE] = Hierarchy.from_rows(SENSITIVE, [
        [str(v)] + [f"{v // w * w}-{v // w * w + w - 1}" for w in widths] + ["*"] for v in values])
    return table, hier
