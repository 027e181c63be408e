"""The metric and reader seams: the ambiguity metric and Parquet input, each one module.

Ambiguity is checked against a hand computation here; the property tests over `METRICS`
(tests/test_engine_property.py, tests/test_engine_models_property.py) compare Flash with the
exhaustive search for it like for every registered metric. Parquet input must give exactly the
release the same table gives as CSV, from a flag-only run and from a TOML run file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedanon.cli import main
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.io.registry import format_of, formats
from fedanon.data.table import EncodedTable
from fedanon.engine import AnonymizationConfig, anonymize
from fedanon.model.metrics.registry import metric_names, metric_type

from datasets import EXAMPLE_DIR as EXAMPLE
QIS = ("age", "sex", "zipcode")


def test_ambiguity_by_hand():
    # one QI with four leaves a, b, c, d; level 1 groups {a, b} and {c, d}; level 2 is '*'
    h = Hierarchy("q", [[b"a", b"ab", b"*"], [b"b", b"ab", b"*"], [b"c", b"cd", b"*"], [b"d", b"cd", b"*"]])
    table = EncodedTable.from_rows(["q"], [["a"], ["a"], ["b"], ["c"], ["d"], ["d"]])
    # k = 2 at level 0: class {b} and class {c} have one row each; with suppression 1/3 both are
    # suppressed (2 rows): ambiguity = (4 kept rows x 1 + 2 suppressed rows x 4 leaves) / 6 = 2.
    # At level 1: classes {a,a,b} and {c,d,d}, every row stands for 2 leaves: ambiguity 2 as well;
    # level 2: 4. The tie between level 0 and 1 goes to the lower node.
    result = anonymize(table, {"q": h}, AnonymizationConfig(["q"], k=2, suppression=1 / 3, metric="ambiguity"))
    assert result.transformation == {"q": 0}
    assert result.information_loss == pytest.approx(2.0)
    result = anonymize(table, {"q": h}, AnonymizationConfig(["q"], k=2, metric="ambiguity"))
    assert result.transformation == {"q": 1} and result.information_loss == pytest.approx(2.0)
    result = anonymize(table, {"q": h}, AnonymizationConfig(["q"], k=4, metric="ambiguity"))
    assert result.transformation == {"q": 2} and result.information_loss == pytest.approx(4.0)


def test_ambiguity_is_registered_with_its_traits():
    assert "ambiguity" in metric_names()
    metric = metric_type("ambiguity")
    assert metric.monotone_without_suppression and not metric.monotone_with_suppression
    assert not metric.needs_value_marginals and not metric.charges_suppressed_values


def test_ambiguity_from_the_cli(tmp_path, capsys):
    code = main(["anonymize", str(EXAMPLE / "example.csv"),
                 *[f"--qi={c}={EXAMPLE / f'example_hierarchy_{c}.csv'}" for c in QIS],
                 "--k", "2", "--metric", "ambiguity", "-o", str(tmp_path / "out.csv"), "-q", "--verify"])
    assert code == 0, capsys.readouterr().err


def _parquet(tmp_path: Path) -> Path:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = pacsv.read_csv(EXAMPLE / "example.csv", parse_options=pacsv.ParseOptions(delimiter=";"))
    assert pa.types.is_integer(table.schema.field("age").type)  # numbers stay numbers in the file
    path = tmp_path / "example.parquet"
    pq.write_table(table, path)
    return path


def test_parquet_input_gives_the_csv_release(tmp_path, capsys):
    source = _parquet(tmp_path)
    assert format_of(source) == "parquet" and format_of(EXAMPLE / "example.csv") == "csv"
    assert {"csv", "parquet"} <= set(formats())
    qi = [f"--qi={c}={EXAMPLE / f'example_hierarchy_{c}.csv'}" for c in QIS]
    model = ["--k", "2", "--sensitive", "diagnosis", "--l-diversity", "distinct:2", "--suppression", "0.2"]
    from_csv, from_parquet, from_toml = tmp_path / "csv.csv", tmp_path / "pq.csv", tmp_path / "toml.csv"
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *qi, *model, "-o", str(from_csv), "-q"]) == 0
    assert main(["anonymize", str(source), *qi, *model, "-o", str(from_parquet), "-q", "--verify"]) == 0
    run = tmp_path / "run.toml"
    run.write_text("\n".join([f'input = "{source}"', f'output = "{from_toml}"', "k = 2", 'sensitive = "diagnosis"',
                              'l_diversity = "distinct:2"', "suppression = 0.2", "[qi]",
                              *[f'{c} = "{EXAMPLE / f"example_hierarchy_{c}.csv"}"' for c in QIS]]) + "\n")
    assert main(["anonymize", "--config", str(run), "-q"]) == 0
    expected = from_csv.read_text(encoding="utf-8")
    assert from_parquet.read_text(encoding="utf-8") == expected
    assert from_toml.read_text(encoding="utf-8") == expected


def test_parquet_missing_value_is_one_line_naming_the_row(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "gap.parquet"
    pq.write_table(pa.table({"age": ["34", None], "sex": ["male", "female"]}), path)
    code = main(["anonymize", str(path), f"--qi=age={EXAMPLE / 'example_hierarchy_age.csv'}", "-o", "/dev/null"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "row 2" in err[0] and "'age'" in err[0]


def test_opaque_codes_are_narrow(tmp_path):
    from fedanon.data.io.registry import read_table

    table = read_table(_parquet(tmp_path))
    assert all(codes.dtype == np.uint8 for codes in table.codes)
    assert table.dictionaries[table.index("sex")] == ["male", "female"]


def test_protocol_c_refuses_ambiguity_before_data_moves():
    """C's key holder never sees a class's values, and ambiguity's class shares depend on them:
    refused with one clear message at the start, not computed wrongly."""
    from fedanon.errors import InputError
    from fedanon.protocols.c.counted_checks import COUNTED_METRICS, check_supported

    assert "ambiguity" not in COUNTED_METRICS and "loss" in COUNTED_METRICS
    with pytest.raises(InputError) as refused:
        check_supported(AnonymizationConfig(list(QIS), k=2, metric="ambiguity"))
    text = str(refused.value)
    assert "metric 'ambiguity'" in text and "depends on the class's generalized values" in text, text
    assert "key holder never sees" in text and "per-QI value" not in text, text
