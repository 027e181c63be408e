"""The report's sensitive-attribute figures from sparse (class, value) entries against a dense,
textbook computation written here (a full classes x values table, plain Python per class).

Random small tables with few- and many-valued attributes (up to 300 values), classes of one
row and of many, values only the suppressed rows hold, and random hierarchies (one to four
levels, one root or several). Integer-derived figures must match exactly, float sums to
within rounding.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.report.risk import table_risk
from fedanon.report.sensitive import ClassEntries, emd_equal, emd_hierarchical, entropy_l, sensitive_figures

CLOSE = dict(rel=1e-12, abs=1e-12)


def random_hierarchy_labels(rng: np.random.Generator, domain: int) -> list[list[int]]:
    """Per level 0..H, each value's ancestor id; ancestors merge randomly level by level."""
    levels = [list(range(domain))]
    for _ in range(int(rng.integers(0, 5))):
        groups = max(levels[-1]) + 1
        parent_of_group = rng.integers(0, max(1, groups // 2), size=groups)
        levels.append([int(parent_of_group[g]) for g in levels[-1]])
    if len(levels) > 1 and rng.random() < 0.7:
        levels[-1] = [0] * domain  # one root (otherwise several top-level trees may remain)
    return levels


def dense_reference(row_class: list[int], row_value: list[int], n_classes: int, all_values: list[int],
                    domain: int, labels: list[list[int]] | None) -> tuple[dict, list[float], list[float], list[float]]:
    """Figures and per-class entropy ℓ, equal and hierarchical EMD from the full count table."""
    hist = [[0] * domain for _ in range(n_classes)]
    for c, v in zip(row_class, row_value):
        hist[c][v] += 1
    n = len(all_values)
    overall = [0.0] * domain
    for v in all_values:
        overall[v] += 1
    overall = [x / n for x in overall]
    entropies, equal, hier = [], [], []
    distinct = min(sum(1 for x in row if x) for row in hist)
    max_l = min(distinct, 10)
    recursive = {str(l): 0.0 for l in range(2, max_l + 1)}
    for row in hist:
        size = sum(row)
        p = [x / size for x in row]
        entropies.append(math.exp(-math.fsum(q * math.log(q) for q in p if q > 0)))
        equal.append(0.5 * math.fsum(abs(q - o) for q, o in zip(p, overall)))
        ordered = sorted(row, reverse=True)
        for l in range(2, max_l + 1):
            recursive[str(l)] = max(recursive[str(l)], ordered[0] / sum(ordered[l - 1:]))
        if labels is not None:
            height = len(labels) - 1
            extra = {v: p[v] - overall[v] for v in range(domain)}  # nodes of level 0: the values
            cost = 0.0
            for level in range(1, height + 1):
                children: dict[int, set[int]] = {}
                for v in range(domain):
                    children.setdefault(labels[level][v], set()).add(labels[level - 1][v])
                nxt = {}
                for node, kids in children.items():
                    pos = math.fsum(max(extra[k], 0.0) for k in kids)
                    neg = math.fsum(max(-extra[k], 0.0) for k in kids)
                    cost += level / height * min(pos, neg)
                    nxt[node] = pos - neg
                extra = nxt
            hier.append(cost)
    figures = {"distinct_l": distinct, "entropy_l": min(entropies), "recursive_c": recursive,
               "t_equal": max(equal)}
    if labels is not None:
        figures["t_hierarchical"] = max(hier)
    return figures, entropies, equal, hier


def random_case(rng: np.random.Generator):
    domain = int(rng.choice([1, 2, 3, 7, 40, 300]))
    n_classes = int(rng.integers(1, 60))
    # class sizes: many singletons and some large classes
    sizes = np.where(rng.random(n_classes) < 0.4, 1, rng.integers(1, 40, size=n_classes))
    row_class = np.repeat(np.arange(n_classes), sizes)
    rng.shuffle(row_class)
    # skewed values: a few frequent ones, a long tail
    weights = rng.pareto(1.0, size=domain) + 1e-3
    row_value = rng.choice(domain, size=row_class.shape[0], p=weights / weights.sum())
    # suppressed rows: part of the reference distribution, in no class; some values only here
    extra = rng.choice(domain, size=int(rng.integers(0, 30)))
    all_values = np.concatenate([row_value, extra])
    return row_class, row_value, n_classes, all_values, domain


def code_map_of(labels: list[list[int]], domain: int) -> np.ndarray:
    """The code map the report gets: a real Hierarchy of string labels, coded by the engine."""
    dictionary = [f"v{v}".encode() for v in range(domain)]
    rows = [[f"v{v}"] + [f"L{level}_{labels[level][v]}" for level in range(1, len(labels))] for v in range(domain)]
    return Hierarchy.from_rows("s", rows).code_map(dictionary)[0]


@pytest.mark.parametrize("seed", range(60))
def test_sparse_figures_match_dense_textbook_computation(seed):
    rng = np.random.default_rng(seed)
    row_class, row_value, n_classes, all_values, domain = random_case(rng)
    labels = random_hierarchy_labels(rng, domain)
    ref, entropies, equal, hier = dense_reference(row_class.tolist(), row_value.tolist(), n_classes,
                                                  all_values.tolist(), domain, labels)
    code_map = code_map_of(labels, domain)
    ours = sensitive_figures(row_class, row_value, n_classes, all_values, domain, code_map)
    # chunks of a few classes each (one class when a class alone exceeds the chunk): the same figures
    assert sensitive_figures(row_class, row_value, n_classes, all_values, domain, code_map,
                             chunk_entries=int(rng.integers(1, 40))) == ours
    assert ours["distinct_l"] == ref["distinct_l"]
    assert ours["recursive_c"] == ref["recursive_c"]  # ratios of exact integer sums: identical
    for key in ("entropy_l", "t_equal", "t_hierarchical"):
        assert ours[key] == pytest.approx(ref[key], **CLOSE), key
    # every class, not only the extreme one
    entries = ClassEntries.from_rows(row_class, row_value, n_classes, domain)
    total = np.bincount(all_values, minlength=domain).astype(np.float64)
    assert entropy_l(entries) == pytest.approx(entropies, **CLOSE)
    assert emd_equal(entries, total) == pytest.approx(equal, **CLOSE)
    assert emd_hierarchical(entries, total, code_map) == pytest.approx(hier, **CLOSE)
    # one-row classes figured once per value: exactly the numbers of figuring every class
    assert ours["entropy_l"] == entropy_l(entries).min() and ours["t_equal"] == emd_equal(entries, total).max()
    assert ours["t_hierarchical"] == emd_hierarchical(entries, total, code_map).max()


def test_table_risk_reports_the_dense_figures_for_released_classes():
    """Through `table_risk`: an 800-value attribute, suppressed rows holding values no class has."""
    rng = np.random.default_rng(34)
    n, domain = 3000, 800
    qi = rng.integers(0, 40, size=n)
    sens = np.minimum(rng.gamma(2.0, 90.0, size=n).astype(np.int64), domain - 1)
    suppressed = np.zeros(n, dtype=bool)
    suppressed[rng.choice(n, 200, replace=False)] = True
    header = ["q", "s"]
    rows = [[f"q{a}", str(b)] for a, b in zip(qi.tolist(), sens.tolist())]
    table = EncodedTable.from_rows(header, rows)
    values = sorted({int(v) for v in sens.tolist()})
    hier = Hierarchy.from_rows("s", [[str(v), f"{v // 10}x", f"{v // 100}xx", "*"] for v in values])
    risk = table_risk(table, ["q"], suppressed=suppressed, sensitive=["s"], hierarchies={"s": hier})
    got = risk["satisfies"]["sensitive"]["s"]
    # the reference: classes of released rows by their QI value, in plain Python
    released = [i for i in range(n) if not suppressed[i]]
    class_of = {q: j for j, q in enumerate(sorted({rows[i][0] for i in released}))}
    value_code = {v: j for j, v in enumerate(sorted({r[1] for r in rows}))}
    labels = [[0] * len(value_code) for _ in range(4)]
    for v, j in value_code.items():
        labels[0][j], labels[1][j], labels[2][j], labels[3][j] = j, int(v) // 10, int(v) // 100, 0
    ref, _, _, _ = dense_reference([class_of[rows[i][0]] for i in released], [value_code[rows[i][1]] for i in released],
                                   len(class_of), [value_code[r[1]] for r in rows], len(value_code), labels)
    assert got["distinct_l"] == ref["distinct_l"] and got["recursive_c"] == ref["recursive_c"]
    for key in ("entropy_l", "t_equal", "t_hierarchical"):
        assert got[key] == pytest.approx(ref[key], **CLOSE), key
