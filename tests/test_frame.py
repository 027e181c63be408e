"""`fedanon.anonymize_frame`: typed DataFrames in and out, the same optimum as the CSV path."""

from __future__ import annotations


import numpy as np
import pytest

pd = pytest.importorskip("pandas", reason="pandas is the [frame] extra")

import fedanon  # noqa: E402
from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, anonymize, read_table_csv  # noqa: E402
from fedanon.oracle.verify import verify_anonymized  # noqa: E402
from fedanon.errors import InputError  # noqa: E402

from datasets import ADULT_DIR
from datasets import EXAMPLE_DIR as EX_DIR
QIS = ["age", "sex", "race", "education"]


@pytest.fixture(scope="module")
def adult_frame():
    df = pd.read_csv(ADULT_DIR / "adult.csv", sep=";")
    assert df["age"].dtype.kind == "i"  # typed input: ages are integers, not strings
    df["id"] = np.arange(len(df))  # an identifying column with no declared role
    return df


def test_same_optimum_as_the_engine_on_the_csv_and_typed_output(adult_frame):
    hier = {q: ADULT_DIR / f"adult_hierarchy_{q}.csv" for q in QIS}
    out, report = fedanon.anonymize_frame(adult_frame, hier, k=10, suppression=0.02,
                                          sensitive="salary-class", l_diversity="distinct:2",
                                          insensitive=["occupation"])
    header, rows = read_table_csv(ADULT_DIR / "adult.csv")
    hobj = {q: Hierarchy.read_csv(p, q) for q, p in hier.items()}
    from fedanon.engine import LDiversity

    config = AnonymizationConfig(QIS, k=10, suppression=0.02, l_diversity=LDiversity("distinct", 2, "salary-class"))
    expected = anonymize(EncodedTable.from_rows(header, rows), hobj, config)
    assert isinstance(report, fedanon.Report)  # the issue's `-> (DataFrame, Report)`, exported at the top
    assert fedanon.FrameReport is fedanon.Report  # the old name stays as a deprecated alias
    assert report.transformation == expected.transformation
    assert report.information_loss == pytest.approx(expected.information_loss)
    assert int(report.suppressed.sum()) == expected.suppressed_rows
    # roles: undeclared columns never reach the output
    assert list(out.columns) == ["sex", "age", "race", "education", "occupation", "salary-class"]
    assert "id" in report.dropped_columns and "workclass" in report.dropped_columns
    assert out.index.equals(adult_frame.index)
    # typed output: level-0 QIs keep their dtype (suppressed = missing), generalized ones are categories
    for q, level in report.transformation.items():
        if level == 0:
            assert out[q].dtype.kind == adult_frame[q].dtype.kind or out[q].dtype == adult_frame[q].dtype
        else:
            assert isinstance(out[q].dtype, pd.CategoricalDtype)
        assert out[q][report.suppressed].isna().all() and out[q][~report.suppressed].notna().all()
    assert (out["occupation"] == adult_frame["occupation"]).all()
    # the verifier accepts the frame (spelled as text the way the CSV spells it)
    released = ~report.suppressed.to_numpy()
    cols = list(out.columns)
    out_cols = [[str(v) if ok or c not in QIS else "*" for v, ok in zip(out[c].tolist(), released)] for c in cols]
    out_rows = [list(r) for r in zip(*out_cols)]
    raw_rows = [list(r) for r in zip(*([str(v) for v in adult_frame[c].tolist()] for c in cols))]
    problems = verify_anonymized(cols, raw_rows, cols, out_rows, config, hobj,
                                 transformation=report.transformation, suppressed=list(~released))
    assert problems == []


def test_builders_typed_ints_floats_and_dates():
    rng = np.random.default_rng(7)
    n = 600
    df = pd.DataFrame({
        "age": rng.integers(18, 90, n),
        "income": rng.integers(10, 200, n) * 1000.0,  # integral floats
        "born": pd.to_datetime("1950-01-01") + pd.to_timedelta(rng.integers(0, 20000, n), unit="D"),
        "zip": [f"{z:05d}" for z in rng.integers(10000, 99999, n)],
        "disease": rng.choice(["flu", "cold", "asthma"], n),
    })
    out, report = fedanon.anonymize_frame(df, {"age": "interval", "income": "auto", "born": "date", "zip": "mask"},
                                          k=5, suppression=0.05, insensitive=["disease"])
    sizes = out[~report.suppressed].groupby(list(report.transformation), observed=True).size()
    assert sizes.min() >= 5
    born_levels = report.hierarchies["born"].rows[0]
    assert born_levels[0].decode() == df["born"].iloc[0].strftime("%Y-%m-%d")
    assert report.hierarchies["income"].rows[0][0].decode() == str(int(df["income"].iloc[0]))
    d = report.to_dict()
    assert d["risk"]["output"]["satisfies"]["k"] >= 5 and d["risk"]["input"]["sample_uniques"] > 0
    assert d["utility"]["metrics"]["nonuniform-entropy"]["output"] == pytest.approx(report.information_loss)


def test_errors_name_the_problem():
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    with pytest.raises(InputError, match="unknown column 'c'"):
        fedanon.anonymize_frame(df, {"c": "auto"}, k=2)
    with pytest.raises(InputError, match="two roles"):
        fedanon.anonymize_frame(df, {"a": "auto"}, insensitive=["a"])
    with pytest.raises(InputError, match="anonymize_frame"):
        anonymize(df, {}, AnonymizationConfig(["a"]))  # the engine names the DataFrame API


@pytest.mark.filterwarnings("error::DeprecationWarning")  # pandas deprecates values outside a categorical's categories
def test_suppressed_cells_of_generalized_columns_are_missing_not_stars():
    # age and zipcode do not top out in "*" in the example, so there the suppressed cell is no category
    frame = pd.read_csv(EX_DIR / "example.csv", sep=";", dtype=str)
    hier = {c: str(EX_DIR / f"example_hierarchy_{c}.csv") for c in ("age", "sex", "zipcode")}
    out, report = fedanon.anonymize_frame(frame, hier, k=3, suppression=0.5, insensitive=["diagnosis"])
    assert report.suppressed.any() and all(level > 0 for level in report.transformation.values())
    for column in report.transformation:
        assert isinstance(out[column].dtype, pd.CategoricalDtype)
        assert out[column][report.suppressed].isna().all() and out[column][~report.suppressed].notna().all()


def test_an_in_memory_sensitive_hierarchy_reaches_the_model_as_the_hierarchy(monkeypatch):
    """Hierarchical t-closeness from a hierarchy given as rows: the model's parser sees that very
    hierarchy, never a stand-in path that could surface in a message or a report."""
    from fedanon.model.privacy.tcloseness import TCloseness

    seen = []
    parse = TCloseness.parse.__func__

    def spy(cls, value, ctx):
        seen.append(ctx.sensitive_hierarchy)
        return parse(cls, value, ctx)

    monkeypatch.setattr(TCloseness, "parse", classmethod(spy))
    ex = pd.read_csv(EX_DIR / "example.csv", sep=";", dtype=str)
    diagnosis = [line.split(";") for line in (EX_DIR / "example_hierarchy_diagnosis.csv").read_text().splitlines()]
    qi = {q: EX_DIR / f"example_hierarchy_{q}.csv" for q in ("age", "sex", "zipcode")}
    out, report = fedanon.anonymize_frame(ex, qi, sensitive="diagnosis", sensitive_hierarchy=diagnosis,
                                          t_closeness="0.2:hierarchical")
    assert len(seen) == 1 and isinstance(seen[0], Hierarchy) and seen[0].rows[0][0] == diagnosis[0][0].encode()
    assert "<given>" not in str(report.to_dict())
    with pytest.raises(InputError, match="hierarchical t-closeness needs the hierarchy of 'diagnosis'"):
        fedanon.anonymize_frame(ex, qi, sensitive="diagnosis", t_closeness="0.2:hierarchical")
