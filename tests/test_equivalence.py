"""The equality check behind the protocol tests and `fedanon demo` can fail.

`differences` must reject a run that lacks a column, has an extra one, reports no
transformation or another one, or releases other rows; and its independent verifier
must reject a release that is equal to the centralized result when that result
itself is wrong (an engine bug shared by both sides).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from fedanon.cli import main
from fedanon.model.config import AnonymizationConfig
from fedanon.model.privacy.presence import DeltaPresence
from fedanon.data.io.delimited import read_table_csv
from fedanon.data.hierarchy import Hierarchy
from fedanon.protocols.sim.equivalence import centralized, differences

from datasets import EXAMPLE_DIR as DATA
QIS = ["age", "sex", "zipcode"]


@pytest.fixture(scope="module")
def example():
    columns, rows = read_table_csv(DATA / "example.csv")
    hierarchies = {a: Hierarchy.read_csv(DATA / f"example_hierarchy_{a}.csv", a) for a in QIS + ["diagnosis"]}
    return columns, rows, hierarchies


@pytest.fixture(scope="module")
def central(example):
    columns, rows, hierarchies = example
    return centralized(columns, rows, hierarchies, AnonymizationConfig(QIS, k=2, suppression=0.25))


def permuted(rows):
    return [list(r) for r in reversed(rows)]


def test_identical_permuted_run_is_equivalent(central) -> None:
    assert differences(central, dict(central.result.transformation), central.columns, permuted(central.rows)) == []


def test_missing_column_is_a_difference(central) -> None:
    for drop in range(len(central.columns)):
        columns = [c for i, c in enumerate(central.columns) if i != drop]
        rows = [[v for i, v in enumerate(r) if i != drop] for r in central.rows]
        problems = differences(central, dict(central.result.transformation), columns, rows)
        assert any("lacks columns" in p and central.columns[drop] in p for p in problems), problems


def test_no_columns_at_all_is_a_difference(central) -> None:
    assert differences(central, dict(central.result.transformation), [], [[] for _ in central.rows])


def test_extra_column_is_a_difference(central) -> None:
    rows = [r + ["x"] for r in central.rows]
    assert any("extra" in p or "lacks" in p or "columns" in p
               for p in differences(central, dict(central.result.transformation), central.columns + ["tid"], rows))


def test_transformation_must_be_reported_and_equal(central) -> None:
    assert any("no transformation" in p for p in differences(central, None, central.columns, central.rows))
    other = {q: 0 for q in QIS}
    assert any("differs" in p for p in differences(central, other, central.columns, central.rows))


def test_other_rows_are_a_difference(central) -> None:
    rows = [list(r) for r in central.rows]
    rows[0][3] = "gastritis" if rows[0][3] != "gastritis" else "pneumonia"
    assert any("multisets differ" in p for p in differences(central, dict(central.result.transformation),
                                                            central.columns, rows))


def test_verifier_catches_an_error_shared_by_both_sides(example, central) -> None:
    """A 'centralized' result that is not 2-anonymous, matched exactly by the run, still fails."""
    columns, rows, _ = example
    wrong = copy.copy(central)
    wrong.result = copy.copy(central.result)
    wrong.result.transformation = {q: 0 for q in QIS}  # the raw table: no class has 2 rows
    wrong.rows = [list(r) for r in rows]
    problems = differences(wrong, {q: 0 for q in QIS}, columns, permuted(rows))
    assert problems and all(p.startswith("independent verifier") for p in problems)
    assert any("k=2" in p for p in problems)


def test_verifier_rejects_rows_not_generalized_from_the_input(example, central) -> None:
    """Equal multisets on both sides, but a cell that is no generalization of any input row."""
    fake = copy.copy(central)
    fake.rows = [list(r) for r in central.rows]
    fake.rows[0][0] = "61-99" if fake.rows[0][0] != "61-99" else "1-19"
    problems = differences(fake, dict(central.result.transformation), fake.columns, fake.rows)
    assert any(p.startswith("independent verifier") for p in problems), problems


def test_delta_presence_release_is_verified(example) -> None:
    columns, rows, hierarchies = example
    subset = np.array([i % 2 == 0 for i in range(len(rows))])
    config = AnonymizationConfig(QIS, k=2, delta_presence=DeltaPresence(0.0, 0.6), suppression=0.25)
    c = centralized(columns, rows, hierarchies, config, subset)
    assert len(c.rows) == int(subset.sum())
    assert differences(c, dict(c.result.transformation), c.columns, permuted(c.rows)) == []
    assert differences(c, dict(c.result.transformation), c.columns[1:], [r[1:] for r in c.rows])


def test_demo_example_in_memory_reports_ok(capsys, tmp_path) -> None:
    """The demo's own comparison (both splits) on the example, threads instead of daemons: quick."""
    assert main(["demo", "--dataset", "example", "--in-memory", "--parties", "2", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # one line per protocol and split (B, and A where registered), never a mismatch
    assert out.count("OK: identical to the centralized anonymization") >= 2 and "MISMATCH" not in out
