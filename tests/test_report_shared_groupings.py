"""The report reuses the search's groupings (no second prepare, the input grouped once) and says
exactly what it said when every figure grouped the rows itself.

Reference: `table_risk` without `classes=` (its own lexicographic grouping of the released
rows of the table it is given) and `metric_scores` without the shared groupings (its own
prepare); both are the code paths the report used before the sharing.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, LDiversity, anonymize, read_table_csv
from fedanon.model.privacy.presence import DeltaPresence
from fedanon.report import analysis
from fedanon.report.risk import table_risk
from fedanon.report.utility import metric_scores

from datasets import ADULT_DIR
QIS = ["age", "sex", "race", "marital-status", "education", "workclass"]

CONFIGS = {
    "k5-supp": dict(k=5, suppression=0.04),
    "distinct-l-supp": dict(k=2, suppression=0.05, l_diversity=LDiversity("distinct", 2, "occupation")),
    "k10-dm": dict(k=10, suppression=0.0, metric="discernibility"),
    "presence": dict(k=1, suppression=0.02, delta_presence=DeltaPresence(0.0, 0.6)),
}


@pytest.fixture(scope="module")
def adult():
    header, rows = read_table_csv(ADULT_DIR / "adult.csv")
    rows = rows[::3]
    hier = {q: Hierarchy.read_csv(ADULT_DIR / f"adult_hierarchy_{q}.csv", q) for q in QIS}
    subset = np.random.default_rng(7).random(len(rows)) < 0.4
    return EncodedTable.from_rows(header, rows), hier, subset


def _own_groupings(table, hier, config, result, subset):
    """Every figure grouping rows itself (the reference)."""
    sens = config.sensitive_attributes
    common = dict(sensitive=sens, hierarchies=hier, sample=subset)
    return (table_risk(table, QIS, suppressed=np.zeros(table.n_rows, dtype=bool), **common),
            table_risk(result.output, QIS, suppressed=np.asarray(result.suppressed), **common),
            metric_scores(table, hier, config, result, subset))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_report_with_shared_groupings_equals_own_groupings(adult, name, monkeypatch):
    table, hier, subset = adult
    config = AnonymizationConfig(QIS, **CONFIGS[name])
    subset = subset if config.delta_presence is not None else None
    assert anonymize(table, hier, config, research_subset=subset).prepared is None  # not kept by default
    result = anonymize(table, hier, config, research_subset=subset, keep_prepared=True)
    assert (result.suppressed_rows > 0) == (config.suppression > 0)  # suppressed classes are renumbered away
    risk_in, risk_out, metrics = _own_groupings(table, hier, config, result, subset)

    prepares = []
    original = analysis.prepare
    monkeypatch.setattr(analysis, "prepare", lambda *a, **k: prepares.append(1) or original(*a, **k))
    before = result.prepared.grouper.row_groupings
    shared = analysis.analyze(table, hier, config, result, research_subset=subset)
    assert prepares == []  # the search's structure was reused
    assert result.prepared.grouper.row_groupings - before == 2  # input and top node only; optimum from the search
    assert (shared.risk_input, shared.risk_output, shared.metrics) == (risk_in, risk_out, metrics)

    # without the search's structure (another caller's result): one prepare, same figures
    fresh = analysis.analyze(table, hier, config, dataclasses.replace(result, prepared=None, optimum_classes=None),
                             research_subset=subset)
    assert prepares == [1]
    assert fresh.to_dict() == shared.to_dict()


def test_a_different_table_or_subset_is_never_served_the_search_structure(adult, monkeypatch):
    table, hier, subset = adult
    config = AnonymizationConfig(QIS, k=1, suppression=0.02, delta_presence=DeltaPresence(0.0, 0.6))
    result = anonymize(table, hier, config, research_subset=subset, keep_prepared=True)
    calls = []
    original = analysis.prepare
    monkeypatch.setattr(analysis, "prepare", lambda *a, **k: calls.append(1) or original(*a, **k))
    copy = EncodedTable(list(table.columns), table.codes.copy(), [list(d) for d in table.dictionaries])
    analysis.analyze(copy, hier, config, result, research_subset=subset)
    other = subset.copy()
    other[np.flatnonzero(other)[0]] = False
    analysis.analyze(table, hier, config, result, research_subset=other)
    assert calls == [1, 1]


def test_cli_report_prepares_once(tmp_path, monkeypatch, capsys):
    """`fedanon anonymize --report`: the report is built on the search's structure (no second prepare)."""
    from fedanon.cli import main

    calls = []
    original = analysis.prepare
    monkeypatch.setattr(analysis, "prepare", lambda *a, **k: calls.append(1) or original(*a, **k))
    qi = [x for q in QIS for x in ("--qi", f"{q}={ADULT_DIR / f'adult_hierarchy_{q}.csv'}")]
    code = main(["anonymize", str(ADULT_DIR / "adult.csv"), *qi, "--k", "5", "--suppression", "0.02",
                 "--output", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json"), "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert calls == [] and (tmp_path / "r.json").read_text().count('"risk"') == 1
