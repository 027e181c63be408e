"""Plain-Python re-identification risk, independent of `fedanon.report.risk` (not a test module).

Groups rows with a dict of tuples and applies the textbook formulas (El Emam &
Dankar); shares no code with the NumPy implementation it checks.
"""

from __future__ import annotations

from collections import Counter

import pytest


def reference_risk(header, rows, qis, threshold=0.2, population_rows=None):
    """Plain Python: classes of released rows (not all-'*'), prosecutor/journalist/marketer."""
    idx = [header.index(q) for q in qis]
    released = [tuple(r[i] for i in idx) for r in rows if not all(r[i] == "*" for i in idx)]
    f = Counter(released)
    n = len(released)
    pop = Counter(tuple(r[i] for i in idx) for r in population_rows) if population_rows is not None else f
    big_f = {key: pop[key] for key in f}
    return {
        "rows": n,
        "classes": len(f),
        "sample_uniques": sum(1 for size in f.values() if size == 1),
        "prosecutor": {
            "highest": max(1 / s for s in f.values()),
            "average": sum(1 / f[key] for key in released) / n,
            "records_at_risk": sum(1 for key in released if 1 / f[key] > threshold),
        },
        "journalist": {
            "highest": max(1 / big_f[key] for key in f),
            "average": len(f) / sum(big_f.values()),
            "records_at_risk": sum(1 for key in released if 1 / big_f[key] > threshold),
        },
        "marketer": sum(f[key] / big_f[key] for key in f) / n,
        "class_sizes": sorted(Counter(f.values()).items()),
    }


def assert_matches(ours, ref):
    for key in ("rows", "classes", "sample_uniques"):
        assert ours[key] == ref[key], key
    for model in ("prosecutor", "journalist"):
        for key, value in ref[model].items():
            assert ours[model][key] == pytest.approx(value, rel=1e-12), (model, key)
    assert ours["marketer"]["average"] == pytest.approx(ref["marketer"], rel=1e-12)
    assert [(c["size"], c["classes"]) for c in ours["class_sizes"]] == ref["class_sizes"]
    assert sum(c["records"] for c in ours["class_sizes"]) == ref["rows"]


def generalize_and_suppress(header, rows, qis, hierarchy_files, transformation, k):
    """Reference release of k-anonymity at `transformation`: each QI cell replaced by its label in the
    hierarchy file (read as text), rows of classes smaller than k get '*' in every QI."""
    gen = {}
    for q in qis:
        lines = [line.split(";") for line in hierarchy_files[q].read_text().splitlines() if line]
        gen[q] = {cells[0]: cells[transformation[q]] for cells in lines}
    idx = {q: header.index(q) for q in qis}
    out = [[gen[c][v] if c in gen else v for c, v in zip(header, r)] for r in rows]
    sizes = Counter(tuple(r[idx[q]] for q in qis) for r in out)
    for r in out:
        if sizes[tuple(r[idx[q]] for q in qis)] < k:
            for q in qis:
                r[idx[q]] = "*"
    return out
