"""Shared checks for the privacy-model test files (tests/test_model_*.py).

Every model is held to three independent answers on small random tables: Flash against the
exhaustive search (same transformation and loss), the released table against the verifier
(`fedanon.oracle.verify`, the model's own plain-Python `violation`), and -- where the model has
one -- against the optimum of the independent reference (tests/reference.py, no fedanon code).
A model's test file draws its parameters; the tables, hierarchies and assertions live here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fedanon
from engine_strategies import hierarchies
from fedanon.cli import main
from fedanon.data.table import EncodedTable
from fedanon.engine import AnonymizationConfig, NoSolutionError, anonymize
from fedanon.model.criterion import Criterion
from fedanon.model.registry import PrivacyModel
from fedanon.oracle.exhaustive import exhaustive_optimum
from fedanon.oracle.verify import verify_anonymized
from fedanon.stats.classes import ClassStats
from fedanon.stats.classhist import SparseHistogram
from reference import METRICS as REFERENCE_METRICS
from reference import Model, Reference

EXAMPLE = Path(__file__).resolve().parents[1] / "fedanon" / "data" / "example"
QI_FLAGS = [f"--qi={c}={EXAMPLE / f'example_hierarchy_{c}.csv'}" for c in ("age", "sex", "zipcode")]
ENGINE_METRICS = ["loss", "nonuniform-entropy", "discernibility", "ambiguity", "precision", "aecs"]


@st.composite
def instances(draw, make_model: Callable[[Callable], PrivacyModel], metrics: list[str] = ENGINE_METRICS,
              sensitive_values: tuple[list[str], ...] = (["x", "y"], ["x", "y", "z"], ["x", "x", "y", "z"])):
    """(table, hierarchies, config, rows): 1-3 QIs with random hierarchies, 2-30 rows, a sensitive
    column `s`, k in {1, 2}, a suppression limit and a metric; the model from `make_model(draw)`."""
    q = draw(st.integers(1, 3))
    names = [f"q{i}" for i in range(q)]
    hier = {n: draw(hierarchies(n, max_values=5, max_height=3)) for n in names}
    n_rows = draw(st.integers(2, 30))
    leaves = {n: [r[0].decode() for r in hier[n].rows] for n in names}
    sensitive = draw(st.sampled_from(sensitive_values))
    rows = [[draw(st.sampled_from(leaves[n])) for n in names] + [draw(st.sampled_from(sensitive))]
            for _ in range(n_rows)]
    table = EncodedTable.from_rows(names + ["s"], rows)
    config = AnonymizationConfig(names, k=draw(st.sampled_from([1, 1, 2])),
                                 suppression=draw(st.sampled_from([0.0, 0.2, 0.5])),
                                 metric=draw(st.sampled_from(metrics)), models=[make_model(draw)])
    return table, hier, config, rows


def flash_equals_exhaustive(table, hier, config: AnonymizationConfig, rows, subset: list[bool] | None = None) -> bool:
    """Flash's optimum is the exhaustive one and the verifier accepts the release; True if solved.
    `subset`: the research subset (released rows) of models that need one."""
    research = None if subset is None else np.array(subset)
    expected, expected_loss = exhaustive_optimum(table, hier, config, research)
    if expected is None:
        with pytest.raises(NoSolutionError):
            anonymize(table, hier, config, research_subset=research)
        return False
    result = anonymize(table, hier, config, research_subset=research)
    assert result.transformation == expected
    assert math.isclose(result.information_loss, expected_loss, rel_tol=1e-9, abs_tol=1e-9)
    out = [[v.decode() for v in r] for r in result.output.decode_rows()]
    assert verify_anonymized(table.columns, rows, table.columns, out, config, hier, research_subset=subset,
                             transformation=result.transformation, suppressed=list(result.suppressed),
                             reported_suppressed_rows=result.suppressed_rows, reported_classes=result.classes) == []
    return True


def engine_equals_reference(table, hier, config: AnonymizationConfig, rows, subset: list[bool] | None = None,
                            **reference_model) -> bool:
    """The engine's optimum, loss and release equal the independent reference's; True if solved."""
    assert config.metric in REFERENCE_METRICS
    research = None if subset is None else np.array(subset)
    ref_hier = {name: [[v.decode() for v in r] for r in h.rows] for name, h in hier.items()}
    ref = Reference(list(table.columns), rows, ref_hier,
                    Model(list(config.quasi_identifiers), k=config.k, suppression=config.suppression,
                          metric=config.metric, subset=subset, **reference_model))
    expected = ref.optimum()
    if expected is None:
        with pytest.raises(NoSolutionError):
            anonymize(table, hier, config, research_subset=research)
        return False
    result = anonymize(table, hier, config, research_subset=research)
    assert result.transformation == dict(zip(config.quasi_identifiers, expected.levels))
    assert math.isclose(result.information_loss, expected.loss, rel_tol=1e-9, abs_tol=1e-9)
    got = [[v.decode() for v in row] for row in result.output.decode_rows()]
    assert got == ref.output(expected)
    return True


#: the metrics both the engine and the independent reference compute, for models whose
#: reference is fast enough to run every one of them
REFERENCE_CASE_METRICS = ["loss", "nonuniform-entropy", "discernibility"]


def property_tests(make_model: Callable[[Callable], PrivacyModel],
                   reference_args: Callable[[PrivacyModel], dict[str, Any]], *,
                   exhaustive_examples: int = 150, reference_examples: int = 60,
                   exhaustive_metrics: list[str] = ENGINE_METRICS,
                   reference_metrics: list[str] = REFERENCE_CASE_METRICS,
                   fit: Callable[[tuple], tuple] = lambda instance: instance) -> tuple[Callable, Callable]:
    """The two property tests every model file runs, for the model `make_model` draws:
    Flash equals the exhaustive search (and the verifier agrees) under every engine metric, and
    the engine equals the independent reference, called with `reference_args(model)`. `fit`
    adjusts a drawn instance where the model needs it (e.g. LKC's L no larger than the QIs).
    A model file binds both to names starting with `test_` so that pytest collects them."""

    @settings(max_examples=exhaustive_examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def flash_test(data):
        flash_equals_exhaustive(*fit(data.draw(instances(make_model, metrics=exhaustive_metrics))))

    @settings(max_examples=reference_examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def reference_test(data):
        table, hier, config, rows = fit(data.draw(instances(make_model, metrics=reference_metrics)))
        engine_equals_reference(table, hier, config, rows, **reference_args(config.models[0]))

    return flash_test, reference_test


def sparse_of(dense: np.ndarray) -> SparseHistogram:
    """The same class histograms in the sparse form the engine uses for large domains."""
    cls, value = np.nonzero(dense)
    return SparseHistogram(cls.astype(np.int64), value.astype(np.int64), dense[cls, value].astype(np.int64),
                           dense.shape[0], dense.shape[1])


def dense_and_sparse_verdicts(criterion: Criterion, classes: list[list[int]],
                              attribute: str = "s") -> tuple[list[bool], list[bool]]:
    """A prepared criterion's class-by-class verdict on `classes` (one histogram row per class),
    given once as dense and once as sparse histograms: the two forms must agree."""
    dense = np.array(classes, dtype=np.int64)
    sizes = dense.sum(axis=1)
    return (criterion.classes_ok(ClassStats(sizes, {attribute: dense})).tolist(),
            criterion.classes_ok(ClassStats(sizes, {attribute: sparse_of(dense)})).tolist())


def bad_anonymize_flags_fail(capsys, flags: list[str], message: str) -> None:
    """`fedanon anonymize` of the example table with `flags` exits 2 with one line naming `message`."""
    code = main(["anonymize", str(EXAMPLE / "example.csv"), *QI_FLAGS, *flags, "-o", "/dev/null"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err


def released(path: Path) -> list[str]:
    return sorted(path.read_text(encoding="utf-8").splitlines()[1:])


def simulate_b_equals_anonymize(tmp_path: Path, model_flags: list[str]) -> None:
    """`fedanon simulate --protocol B` (horizontal, 2 parties) releases what `anonymize` does."""
    flags = [*QI_FLAGS, *model_flags]
    sim_out, ref_out = tmp_path / "sim.csv", tmp_path / "ref.csv"
    assert main(["simulate", "--protocol", "B", "--split", "horizontal", "--parties", "2",
                 str(EXAMPLE / "example.csv"), *flags, "--output", str(sim_out), "-q"]) == 0
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *flags, "--output", str(ref_out), "--verify", "-q"]) == 0
    assert released(sim_out) == released(ref_out)




def flag_toml_and_frame_agree(tmp_path: Path, flags: list[str], toml_lines: list[str], frame_kwargs: dict,
                              models: list[dict]) -> dict:
    """The same model given as flags, as a run file and to `anonymize_frame` gives the same release.

    The flag run is verified (`--verify` re-reads the written file with the model's own check) and
    its report must name exactly `models`; the TOML run must write the same rows, and the frame
    the same transformation and suppression. Returns the flag run's report for further checks.
    """
    flags_out, toml_out, report_path = tmp_path / "flags.csv", tmp_path / "toml.csv", tmp_path / "r.json"
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *QI_FLAGS, *flags, "-o", str(flags_out),
                 "--report", str(report_path), "--verify", "-q"]) == 0
    report = json.loads(report_path.read_text())
    assert report["config"]["models"] == models
    assert report["verified"] is True and report["violations"] == []
    run = tmp_path / "run.toml"
    run.write_text("\n".join([
        f'input = "{EXAMPLE / "example.csv"}"', f'output = "{toml_out}"', *toml_lines, "[qi]",
        *[f'{c} = "{EXAMPLE / f"example_hierarchy_{c}.csv"}"' for c in ("age", "sex", "zipcode")]]) + "\n")
    assert main(["anonymize", "--config", str(run), "-q"]) == 0
    assert released(flags_out) == released(toml_out)

    pd = pytest.importorskip("pandas")
    frame = pd.read_csv(EXAMPLE / "example.csv", sep=";", dtype=str)
    out, frame_report = fedanon.anonymize_frame(
        frame, {c: str(EXAMPLE / f"example_hierarchy_{c}.csv") for c in ("age", "sex", "zipcode")}, **frame_kwargs)
    assert frame_report.transformation == report["transformation"]
    assert int(frame_report.suppressed.sum()) == report["suppressed_rows_in_output"]
    assert len(out) == 8
    return report
