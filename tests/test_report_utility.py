"""Utility figures: per-attribute loss by hand, metric values equal to the engine's reported loss."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, anonymize, read_table_csv
from fedanon.report import analyze

from datasets import ADULT_DIR
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


@pytest.mark.parametrize("suppression", [0.0, 0.05])
def test_distributions_and_released_counts_equal_counting_the_rows(adult, suppression):
    """The report counts values per dictionary entry, not per row: every shown count, before
    and after, must equal counting the decoded rows of the input and of the engine's output
    (QIs generalized, suppressed rows '*', the sensitive attribute released unchanged)."""
    from fedanon.model.privacy.ldiversity import LDiversity
    from fedanon.report.utility import ValueCounts

    header, rows, table, hier = adult
    config = AnonymizationConfig(["sex", "race", "marital-status", "education"], k=20, suppression=suppression,
                                 l_diversity=LDiversity("distinct", 2, "workclass"))
    result = anonymize(table, hier, config)
    assert (result.suppressed_rows > 0) == (suppression > 0)
    d = analyze(table, hier, config, result).distributions
    assert set(d) == {"sex", "race", "marital-status", "education", "workclass"}
    out_rows = [[v.decode() for v in r] for r in result.output.decode_rows()]
    for column, shown in d.items():
        c = header.index(column)
        for side, data in (("input", [r[c] for r in rows]), ("output", [r[c] for r in out_rows])):
            truth = Counter(data)
            assert sum(n for _, n in shown[side]) == len(rows)
            for label, n in shown[side]:
                if label != "(other)":
                    assert n == truth[label], (column, side, label)
    counts = ValueCounts(table, np.asarray(result.suppressed))
    suppressed = np.asarray(result.suppressed)
    for c in range(len(header)):
        expected = np.bincount(table.codes[~suppressed, c], minlength=len(table.dictionaries[c]))
        assert counts.released(c).tolist() == expected.tolist()


def test_distributions_refuse_an_output_that_is_not_the_generalization(adult):
    from fedanon.report.utility import ValueCounts, distributions

    header, rows, table, hier = adult
    config = AnonymizationConfig(["sex", "race"], k=5)
    result = anonymize(table, hier, config)
    other = {**result.transformation, "race": (result.transformation["race"] + 1) % hier["race"].height}
    counts = ValueCounts(table, np.zeros(table.n_rows, dtype=bool))
    code_maps = {"race": hier["race"].code_map(table.dictionaries[table.column_index("race")])}
    with pytest.raises(ValueError, match="not the input generalized"):
        distributions(table, result.output, ["race"], counts, code_maps, other)


def test_risk_from_class_sizes_alone_equals_risk_from_rows_and_refuses_what_needs_rows(adult):
    from fedanon.report.risk import RowClasses, table_risk

    header, rows, table, hier = adult
    qis = ["sex", "race", "education"]
    plain = table_risk(table, qis)
    # classes in ascending lexicographic order of their code tuples, as the engine numbers them
    _tuples, inverse, sizes = np.unique(table.codes[:, [header.index(q) for q in qis]], axis=0,
                                        return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    assert table_risk(table, qis, classes=RowClasses(None, sizes)) == plain
    assert table_risk(table, qis, classes=RowClasses(inverse, sizes)) == plain
    with pytest.raises(ValueError, match="each released row's class"):
        table_risk(table, qis, sensitive=["workclass"], classes=RowClasses(None, sizes))
    with pytest.raises(ValueError, match="hold"):
        table_risk(table, qis, classes=RowClasses(None, sizes[1:]))
