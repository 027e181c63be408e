"""The §4.3 anonymize-then-integrate baseline for hybrid layouts.

It must reduce to the horizontal baseline when the layout has one column group, and to the
vertical one when every group is a single party holding everybody: both are computed by
code that shares nothing with the hybrid candidate loop but the loss function.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from datasets import ADULT_DIR, hierarchy_path
from fedanon.cli import main
from fedanon.data.table import EncodedTable
from fedanon.engine.anonymizer import anonymize
from fedanon.oracle.baselines import horizontal_baseline, hybrid_baseline, vertical_baseline
from fedanon.protocols.sim.baseline import baseline_for_split
from hybrid_cases import ADULT_COLUMNS, ADULT_QIS, adult_layout
from protocol_cases import MODELS, sample_adult


@pytest.fixture(scope="module")
def adult_sample():
    return sample_adult(ADULT_COLUMNS, 900, seed=20240505)


def _secure(table, hierarchies, config):
    central = anonymize(table, hierarchies, config)
    return central.transformation, np.asarray(central.suppressed, dtype=bool)


@pytest.mark.parametrize("model", ["k", "recursive-l"])
def test_one_column_group_is_the_horizontal_baseline(adult_sample, model: str) -> None:
    columns, rows, hierarchies = adult_sample
    config = MODELS[model](ADULT_QIS, "salary-class", 0.02, "loss")
    table = EncodedTable.from_rows(list(columns), rows)
    parties = [list(range(0, len(rows), 2)), list(range(1, len(rows), 2))]
    secure = _secure(table, hierarchies, config)
    hybrid = hybrid_baseline(table, hierarchies, config, [(columns, parties)], secure)
    horizontal = horizontal_baseline(table, hierarchies, config, parties, secure)
    assert hybrid.baseline_loss == pytest.approx(horizontal.baseline_loss)
    assert np.array_equal(hybrid.row_levels, horizontal.row_levels)
    assert np.array_equal(hybrid.suppressed, horizontal.suppressed)


def test_single_party_groups_are_the_vertical_baseline(adult_sample) -> None:
    columns, rows, hierarchies = adult_sample
    config = MODELS["k"](ADULT_QIS, "salary-class", 0.02, "loss")
    config.k = 5
    table = EncodedTable.from_rows(list(columns), rows)
    everybody = [list(range(len(rows)))]
    column_groups = [["sex", "age", "race"], ["marital-status", "education", "salary-class"]]
    secure = _secure(table, hierarchies, config)
    hybrid = hybrid_baseline(table, hierarchies, config, [(g, everybody) for g in column_groups], secure)
    vertical = vertical_baseline(table, hierarchies, config, column_groups, secure)
    assert hybrid.baseline_loss == pytest.approx(vertical.baseline_loss)
    assert hybrid.secure_loss == pytest.approx(vertical.secure_loss)


def test_the_baseline_of_a_layout_runs_on_the_joined_table(adult_sample) -> None:
    columns, rows, hierarchies = adult_sample
    layout = adult_layout("2+2")
    config = MODELS["k"](ADULT_QIS, "salary-class", 0.02, "loss")
    result = baseline_for_split(columns, rows, hierarchies, config, "hybrid", 0, layout=layout)
    assert result.split == "hybrid" and len(result.suppressed) == len(layout.joined_rows(len(rows)))
    # the payroll group holds no quasi-identifier, so it cannot be the anonymizing group
    assert set(result.details["candidate_losses"]) == {"group 1", "group 2"}


def test_simulate_prints_and_reports_the_hybrid_baseline(tmp_path: Path, capsys) -> None:
    layout = adult_layout("2+1")
    flags = [f"--qi={q}={hierarchy_path('adult', q)}" for q in ADULT_QIS]
    code = main(["simulate", str(ADULT_DIR / "adult.csv"), "--split", "hybrid", "--layout", str(layout.path),
                 *flags, "--insensitive", "salary-class", "--k", "5", "--metric", "loss", "--in-memory", "-q",
                 "--baseline", "-o", str(tmp_path / "out.csv"), "--report", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == 0
    assert "baseline (hybrid, 3 parties): loss" in out, out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["baseline"]["split"] == "hybrid" and report["baseline"]["percent"] is not None
