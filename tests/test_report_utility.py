"""Utility figures: per-attribute loss by hand, metric values equal to the engine's reported loss."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import fedanon
from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, anonymize, read_table_csv
from fedanon.report import analyze

ADULT_DIR = Path(fedanon.__file__).parent / "data" / "adult"
QIS = ["age", "sex", "race", "marital-status", "education"]


@pytest.fixture(scope="module")
def adult():
    header, rows = read_table_csv(ADULT_DIR / "adult.csv")
    rows = rows[::2]
    hier = {q: Hierarchy.read_csv(ADULT_DIR / f"adult_hierarchy_{q}.csv", q) for q in QIS}
    return header, rows, EncodedTable.from_rows(header, rows), hier


@pytest.mark.parametrize("metric", ["loss", "discernibility", "precision"])
def test_metric_values_match_the_engine_and_span_0_to_100(adult, metric):
    header, rows, table, hier = adult
    config = AnonymizationConfig(QIS, k=5, suppression=0.03, metric=metric)
    result = anonymize(table, hier, config)
    a = analyze(table, hier, config, result)
    m = a.metrics[metric]
    assert m["output"] == pytest.approx(result.information_loss, rel=1e-12)
    assert 0 < m["relative_percent"] < 100
    assert m["relative_percent"] == pytest.approx(100 * (m["output"] - m["input"]) / (m["all_suppressed"] - m["input"]))
    if metric == "loss":  # Iyengar's loss: input 0, everything suppressed 1 (by definition)
        assert (m["input"], m["all_suppressed"]) == (0.0, 1.0)
    if metric == "discernibility":  # DM: sum of |E|^2 at the input; n^2 when everything is suppressed
        n = len(rows)
        sizes = Counter(tuple(r[header.index(q)] for q in QIS) for r in rows).values()
        assert m["input"] == sum(s * s for s in sizes) and m["all_suppressed"] == n * n


def test_per_attribute_loss_by_hand(adult):
    header, rows, table, hier = adult
    config = AnonymizationConfig(QIS, k=10, suppression=0.03)
    result = anonymize(table, hier, config)
    a = analyze(table, hier, config, result)
    suppressed = list(result.suppressed)
    for entry in a.attributes:
        q, level = entry["attribute"], entry["level"]
        assert level == result.transformation[q]
        h_rows = [[c.decode() for c in r] for r in hier[q].rows]
        parent = {r[0]: r[level] for r in h_rows}
        leaves = Counter(r[level] for r in h_rows)
        total = len(h_rows)
        per_row = [1.0 if s else (leaves[parent[r[header.index(q)]]] - 1) / (total - 1)
                   for r, s in zip(rows, suppressed)]
        assert entry["loss_percent"] == pytest.approx(100 * sum(per_row) / len(per_row), rel=1e-9)
        assert entry["distinct_output"] == len({parent[r[header.index(q)]] for r, s in zip(rows, suppressed) if not s})


def test_k1_optimum_is_the_input(adult):
    header, rows, table, hier = adult
    config = AnonymizationConfig(QIS, k=1)
    result = anonymize(table, hier, config)
    a = analyze(table, hier, config, result)
    assert all(m["relative_percent"] in (0.0, None) for m in a.metrics.values())
    assert a.risk_input == a.risk_output


def test_distributions_bin_numbers_and_order_intervals(adult):
    header, rows, table, hier = adult
    config = AnonymizationConfig(["age", "sex", "race"], k=200, suppression=0.03)
    result = anonymize(table, hier, config)
    d = analyze(table, hier, config, result).distributions["age"]
    ages = [int(r[header.index("age")]) for r in rows]
    import re

    bins = [(tuple(map(float, re.fullmatch(r"\[(\d+), (\d+)\[", label).groups())), n) for label, n in d["input"]]
    for (a, b), n in bins:
        assert n == sum(1 for x in ages if a <= x < b)
    assert sum(n for _, n in bins) == len(ages)
    labels = [label for label, _ in d["output"]]
    assert result.transformation["age"] > 0 and result.suppressed_rows > 0 and labels[-1] == "*"
    starts = [int(re.match(r"\[?(\d+)", label).group(1)) for label in labels[:-1]]
    assert starts == sorted(starts)  # interval labels read left to right like the input bins


@pytest.mark.parametrize("n_rows", [50, 200_000])  # sparse pairs (ufunc.at per row) and counted pairs
def test_smallest_input_behind_each_output_value_equals_plain_min(n_rows):
    from fedanon.report.utility import _smallest_input_behind

    rng = np.random.default_rng(n_rows)
    nums = rng.normal(size=3000) * 100
    in_codes = rng.integers(0, 3000, n_rows).astype(np.int32)
    out_codes = (in_codes // 70 + rng.integers(0, 2, n_rows)).astype(np.int32)  # some rows elsewhere ('*')
    keys = np.full(45, np.inf)
    keys[3] = -1e9  # a smaller key already there stays
    _smallest_input_behind(keys, out_codes, in_codes, nums)
    expected = {3: -1e9}
    for o, i in zip(out_codes.tolist(), in_codes.tolist()):
        expected[o] = min(expected.get(o, np.inf), nums[i])
    assert keys.tolist() == [expected.get(o, np.inf) for o in range(45)]
