"""Several sensitive attributes at once, each with its own model.

`--sensitive` repeats; with more than one, every model of a sensitive attribute names its
attribute (`--l-diversity diagnosis=distinct:2`; in TOML a `NAME=...` string or a table with
`attribute`). The single-attribute spelling keeps working (tests/test_model_*.py use it).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine_strategies import hierarchies
from fedanon.cli import main
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.engine import AnonymizationConfig, NoSolutionError, anonymize
from fedanon.model.privacy.alphak import AlphaK
from fedanon.model.privacy.blikeness import BetaLikeness
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.oracle.exhaustive import exhaustive_optimum
from fedanon.oracle.verify import verify_anonymized
from model_cases import EXAMPLE, QI_FLAGS, released

INCOME = ["low", "high", "mid", "low", "high", "mid", "low", "low"]  # one per row of example.csv


def _table(tmp_path: Path) -> Path:
    """example.csv with a second sensitive column, income."""
    lines = (EXAMPLE / "example.csv").read_text(encoding="utf-8").splitlines()
    out = tmp_path / "two.csv"
    out.write_text("\n".join([lines[0] + ";income"] + [f"{line};{v}" for line, v in zip(lines[1:], INCOME)]) + "\n",
                   encoding="utf-8")
    return out


def test_two_attributes_each_with_its_model(tmp_path):
    data = _table(tmp_path)
    out, report_path = tmp_path / "out.csv", tmp_path / "r.json"
    flags = ["--sensitive", "diagnosis", "--sensitive", "income", "--l-diversity", "diagnosis=distinct:2",
             "--alpha-k", "income=0.6", "--suppression", "0.25"]
    assert main(["anonymize", str(data), *QI_FLAGS, *flags, "-o", str(out), "--report", str(report_path),
                 "--verify", "-q"]) == 0
    report = json.loads(report_path.read_text())
    assert sorted(report["config"]["models"], key=lambda m: m["model"]) == [
        {"model": "alpha_k", "alpha": 0.6, "attribute": "income"},
        {"model": "l_diversity", "variant": "distinct", "l": 2.0, "attribute": "diagnosis", "c": None}]
    assert sorted(report["columns"]["sensitive"]) == ["diagnosis", "income"]
    assert report["verified"] is True
    assert out.read_text(encoding="utf-8").splitlines()[0].split(";") == ["age", "sex", "zipcode", "diagnosis", "income"]
    # the same optimum as the API with both models; each model alone is weaker or equal
    rows = [line.split(";") for line in data.read_text(encoding="utf-8").splitlines()]
    table = EncodedTable.from_rows(rows[0], rows[1:])
    hier = {c: Hierarchy.read_csv(EXAMPLE / f"example_hierarchy_{c}.csv", c) for c in ("age", "sex", "zipcode")}
    both = AnonymizationConfig(["age", "sex", "zipcode"], suppression=0.25,
                               models=[AlphaK(0.6, "income"), LDiversity("distinct", 2.0, "diagnosis")])
    assert anonymize(table, hier, both).transformation == report["transformation"]


def test_toml_lists_name_their_attributes(tmp_path):
    data = _table(tmp_path)
    flags_out, toml_out = tmp_path / "flags.csv", tmp_path / "toml.csv"
    assert main(["anonymize", str(data), *QI_FLAGS, "--sensitive", "diagnosis", "--sensitive", "income",
                 "--l-diversity", "diagnosis=distinct:2", "--l-diversity", "income=distinct:2",
                 "--suppression", "0.5", "-o", str(flags_out), "-q"]) == 0
    run = tmp_path / "run.toml"
    run.write_text("\n".join([
        f'input = "{data}"', f'output = "{toml_out}"', 'sensitive = ["diagnosis", "income"]', "suppression = 0.5",
        'l_diversity = ["diagnosis=distinct:2", {variant = "distinct", l = 2, attribute = "income"}]', "[qi]",
        *[f'{c} = "{EXAMPLE / f"example_hierarchy_{c}.csv"}"' for c in ("age", "sex", "zipcode")]]) + "\n")
    assert main(["anonymize", "--config", str(run), "-q"]) == 0
    assert released(flags_out) == released(toml_out)


@pytest.mark.parametrize("flags,message", [
    (["--sensitive", "diagnosis", "--sensitive", "income", "--l-diversity", "distinct:2"], "name one"),
    (["--sensitive", "diagnosis", "--sensitive", "income", "--l-diversity", "diagnosis=distinct:2"],
     "--sensitive income given but no privacy model uses it"),
    (["--sensitive", "diagnosis", "--sensitive", "diagnosis", "--l-diversity", "distinct:2"], "given twice"),
])
def test_ambiguous_or_unused_attributes_are_one_line_errors(tmp_path, capsys, flags, message):
    code = main(["anonymize", str(_table(tmp_path)), *QI_FLAGS, *flags, "-o", str(tmp_path / "o.csv")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_flash_equals_exhaustive_with_two_sensitive_attributes(data):
    q = data.draw(st.integers(1, 3))
    names = [f"q{i}" for i in range(q)]
    hier = {n: data.draw(hierarchies(n, max_values=5, max_height=3)) for n in names}
    leaves = {n: [r[0].decode() for r in hier[n].rows] for n in names}
    rows = [[data.draw(st.sampled_from(leaves[n])) for n in names]
            + [data.draw(st.sampled_from(["x", "y", "z"])), data.draw(st.sampled_from(["lo", "hi"]))]
            for _ in range(data.draw(st.integers(2, 30)))]
    table = EncodedTable.from_rows(names + ["s", "u"], rows)
    config = AnonymizationConfig(names, suppression=data.draw(st.sampled_from([0.0, 0.2, 0.5])),
                                 metric=data.draw(st.sampled_from(["loss", "nonuniform-entropy", "discernibility"])),
                                 models=[LDiversity("distinct", 2.0, "s"),
                                         BetaLikeness(data.draw(st.sampled_from([0.5, 1.0, 2.0])), "basic", "u")])
    expected, loss = exhaustive_optimum(table, hier, config, None)
    if expected is None:
        with pytest.raises(NoSolutionError):
            anonymize(table, hier, config)
        return
    result = anonymize(table, hier, config)
    assert result.transformation == expected and math.isclose(result.information_loss, loss, rel_tol=1e-9, abs_tol=1e-9)
    out = [[v.decode() for v in r] for r in result.output.decode_rows()]
    assert verify_anonymized(table.columns, rows, table.columns, out, config, hier,
                             transformation=result.transformation, suppressed=list(result.suppressed),
                             reported_suppressed_rows=result.suppressed_rows, reported_classes=result.classes) == []


@pytest.mark.slow
def test_simulate_protocol_b_equals_central(tmp_path):
    data = _table(tmp_path)
    flags = [*QI_FLAGS, "--sensitive", "diagnosis", "--sensitive", "income", "--l-diversity", "diagnosis=distinct:2",
             "--alpha-k", "income=0.6", "--suppression", "0.25"]
    sim_out, ref_out = tmp_path / "sim.csv", tmp_path / "ref.csv"
    assert main(["simulate", "--protocol", "B", "--split", "horizontal", "--parties", "2", str(data), *flags,
                 "--output", str(sim_out), "-q"]) == 0
    assert main(["anonymize", str(data), *flags, "--output", str(ref_out), "--verify", "-q"]) == 0
    assert released(sim_out) == released(ref_out)
