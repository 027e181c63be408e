"""The columnar input path gives the same results as the old row-list path, on every fixture.

"Old path" here is built independently in this file: Python's `csv` module splits the
file into row lists of stripped strings, `EncodedTable.from_rows` encodes them (the way
the engine was fed before the pyarrow reader), the engine runs, and the output rows are
written with `csv.writer`. The "columnar path" is what the CLI and the parties use now:
`read_columns` (pyarrow, dictionary-encoded, narrow codes) -> `select` -> `encoded()`,
and `write_columns` for the output.

Which bugs make these tests fail: the reader dropping, merging or reordering values
(trimming, quoting, first-appearance order), a code dtype overflowing (uint8/uint16
codes), `select`/`encoded` mixing up columns, and the writer emitting a different cell
-- each changes a decoded row, a transformation, a loss or a suppression mask.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from fedanon.cli import main
from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, anonymize
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.data.io.delimited import read_columns

from datasets import DATA_DIR as DATA
EX = DATA / "example"
ADULT = DATA / "adult"
EX_QIS = ["age", "sex", "zipcode"]
ADULT_QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
             "occupation", "salary-class"]
FIXTURES = sorted(DATA.glob("*/*.csv"))


def csv_module_rows(path: Path, delimiter: str = ";") -> list[list[str]]:
    """Header + rows with the standard library only: no code shared with the engine's reader."""
    with open(path, encoding="utf-8-sig", newline="") as fh:
        return [[cell.strip() for cell in row] for row in csv.reader(fh, delimiter=delimiter)
                if row and any(cell.strip() for cell in row)]


def old_path_table(path: Path, columns: list[str]) -> EncodedTable:
    """The row path: Python's csv module and `from_rows`, held row-major (C order) as the old
    path held it, so that comparisons with the column-major reader also cover the layout."""
    header, *rows = csv_module_rows(path)
    idx = [header.index(c) for c in columns]
    table = EncodedTable.from_rows(columns, [[row[i] for i in idx] for row in rows])
    return EncodedTable(table.columns, np.ascontiguousarray(table.codes), table.dictionaries)


def columnar_path_table(path: Path, columns: list[str]) -> EncodedTable:
    return read_columns(path).select(columns).encoded()


def hierarchies(folder: Path, prefix: str, attributes: list[str]) -> dict[str, Hierarchy]:
    return {a: Hierarchy.read_csv(folder / f"{prefix}_hierarchy_{a}.csv", a) for a in attributes}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_reader_decodes_every_fixture_to_the_csv_module_rows(path):
    """Every shipped table and hierarchy: same header, same cells, row for row; codes narrow."""
    expected = csv_module_rows(path)
    table = read_columns(path)
    assert table.columns == expected[0]
    assert table.rows() == expected[1:]
    for codes, dictionary in zip(table.codes, table.dictionaries):
        assert codes.dtype.itemsize == (1 if len(dictionary) <= 256 else 2 if len(dictionary) <= 65536 else 4)
        # codes follow first appearance, as EncodedTable.from_rows assigns them
        first = np.unique(codes, return_index=True)[1]
        assert np.all(np.diff(np.sort(first)) > 0) and list(codes[np.sort(first)]) == list(range(len(dictionary)))


@pytest.mark.parametrize("path", [p for p in FIXTURES if "hierarchy" in p.name], ids=lambda p: p.name)
def test_hierarchy_fixtures_read_as_the_csv_module_rows(path):
    """Hierarchies are read row-wise (line numbers for errors); their levels must equal the plain rows."""
    attribute = path.stem.split("_hierarchy_")[1]
    hierarchy = Hierarchy.read_csv(path, attribute)
    assert [[v.decode("utf-8") for v in row] for row in hierarchy.rows] == csv_module_rows(path)


def assert_same_result(old, new) -> None:
    assert new.transformation == old.transformation
    assert new.information_loss == old.information_loss
    assert new.classes == old.classes
    assert new.suppressed_rows == old.suppressed_rows
    assert np.array_equal(np.asarray(new.suppressed, dtype=bool), np.asarray(old.suppressed, dtype=bool))
    assert new.output.columns == old.output.columns
    assert new.output.decode_rows() == old.output.decode_rows()  # row for row, not only as a multiset


EXAMPLE_CONFIGS = {
    "k2": AnonymizationConfig(EX_QIS, k=2),
    "k3-supp-height": AnonymizationConfig(EX_QIS, k=3, suppression=0.25, metric="height"),
    "recursive-l": AnonymizationConfig(EX_QIS, l_diversity=LDiversity("recursive", 2, "diagnosis", 4)),
    "distinct-l-supp": AnonymizationConfig(EX_QIS, k=2, suppression=0.25,
                                           l_diversity=LDiversity("distinct", 2, "diagnosis")),
    "t-equal": AnonymizationConfig(EX_QIS, k=2, t_closeness=TCloseness(0.5, "equal", "diagnosis")),
    "t-hier-loss": AnonymizationConfig(EX_QIS, t_closeness=TCloseness(0.5, "hierarchical", "diagnosis"),
                                       metric="loss"),
}


@pytest.mark.parametrize("name", list(EXAMPLE_CONFIGS))
def test_example_results_identical_on_both_paths(name):
    config = EXAMPLE_CONFIGS[name]
    columns = EX_QIS + ["diagnosis"]
    hier = hierarchies(EX, "example", columns)
    old = anonymize(old_path_table(EX / "example.csv", columns), hier, config)
    new = anonymize(columnar_path_table(EX / "example.csv", columns), hier, config)
    assert_same_result(old, new)


ADULT_CONFIGS = {
    "k5": AnonymizationConfig(ADULT_QIS, k=5),
    "k10-supp": AnonymizationConfig(ADULT_QIS, k=10, suppression=0.05),
    "k5-supp-loss-6qi": AnonymizationConfig(ADULT_QIS[:6], k=5, suppression=0.02, metric="loss"),
    "distinct-l-supp": AnonymizationConfig(ADULT_QIS[:7] + ["salary-class"], k=2, suppression=0.04,
                                           l_diversity=LDiversity("distinct", 3, "occupation")),
    "entropy-l-dm": AnonymizationConfig(ADULT_QIS[:7], k=1, metric="discernibility",
                                        l_diversity=LDiversity("entropy", 2, "occupation")),
    "t-hier-supp": AnonymizationConfig(ADULT_QIS[:7], k=1, suppression=0.04, metric="precision",
                                       t_closeness=TCloseness(0.2, "hierarchical", "occupation")),
    "t-equal-aecs": AnonymizationConfig(ADULT_QIS[:7], k=3, metric="aecs",
                                        t_closeness=TCloseness(0.3, "equal", "occupation")),
}


@pytest.fixture(scope="module")
def adult_both_paths():
    hier = hierarchies(ADULT, "adult", ADULT_QIS)
    return (old_path_table(ADULT / "adult.csv", ADULT_QIS), columnar_path_table(ADULT / "adult.csv", ADULT_QIS),
            hier)


def test_adult_tables_encode_identically(adult_both_paths):
    old, new, _ = adult_both_paths
    assert new.columns == old.columns
    assert new.dictionaries == old.dictionaries  # same values in the same (first-appearance) order
    assert np.array_equal(new.codes, old.codes)


@pytest.mark.parametrize("name", list(ADULT_CONFIGS))
def test_adult_results_identical_on_both_paths(adult_both_paths, name):
    old_table, new_table, hier = adult_both_paths
    config = ADULT_CONFIGS[name]
    # the engine may only see columns with a role; both paths get the same selection
    columns = list(config.quasi_identifiers) + [a for a in config.sensitive_attributes
                                                if a not in config.quasi_identifiers]
    old = anonymize(old_table.select(columns), hier, config)
    new = anonymize(new_table.select(columns), hier, config)
    assert_same_result(old, new)


def run_cli(capsys, source: Path, out: Path, qis: list[str], hier_paths: dict[str, Path], flags: list[str]) -> dict:
    """`fedanon anonymize` in-process; its JSON report."""
    rep = out.with_name("report.json")
    args = ["anonymize", str(source), "-o", str(out), "--report", str(rep), "-q", *flags]
    for a in qis:
        args += ["--qi", f"{a}={hier_paths[a]}"]
    code = main(args)
    _, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(rep.read_text())


@pytest.mark.parametrize("dataset", ["example", "adult"])
def test_cli_output_file_equals_old_path_written_with_csv_module(tmp_path, capsys, dataset):
    """The whole CLI (columnar read, engine, batched columnar write) vs old path + csv.writer."""
    folder, qis = (EX, EX_QIS) if dataset == "example" else (ADULT, ADULT_QIS[:7])
    sensitive = "diagnosis" if dataset == "example" else "occupation"
    source = folder / f"{dataset}.csv"
    hier_paths = {a: folder / f"{dataset}_hierarchy_{a}.csv" for a in qis + [sensitive]}
    out = tmp_path / "out.csv"
    report = run_cli(capsys, source, out, qis, hier_paths, ["--k", "2", "--suppression", "0.05",
                                                            "--l-diversity", "distinct:2", "--sensitive",
                                                            f"{sensitive}={hier_paths[sensitive]}"])

    header = csv_module_rows(source)[0]
    columns = [c for c in header if c in qis + [sensitive]]  # released columns, input order
    config = AnonymizationConfig(qis, k=2, suppression=0.05, l_diversity=LDiversity("distinct", 2, sensitive))
    old = anonymize(old_path_table(source, columns), {a: Hierarchy.read_csv(p, a) for a, p in hier_paths.items()},
                    config)
    expected = tmp_path / "expected.csv"
    with open(expected, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter=";", lineterminator="\n")
        writer.writerow(old.output.columns)
        writer.writerows([[v.decode("utf-8") for v in row] for row in old.output.decode_rows()])

    assert report["transformation"] == old.transformation
    assert report["information_loss"] == old.information_loss
    assert report["suppressed_rows"] == old.suppressed_rows and report["classes"] == old.classes
    assert csv_module_rows(out) == csv_module_rows(expected)


def test_cli_report_figures_equal_old_path_analysis(tmp_path, capsys):
    """Risk, utility and distributions in the CLI report (column-major table) equal `analyze` on
    the old path's row-major table and result: catches report code that depends on the memory
    layout or on the row path. (The figures themselves are checked against a plain-Python
    reference in tests/test_risk.py.)"""
    from fedanon.report.analysis import analyze

    qis = ADULT_QIS[:7]
    hier_paths = {a: ADULT / f"adult_hierarchy_{a}.csv" for a in qis}
    report = run_cli(capsys, ADULT / "adult.csv", tmp_path / "out.csv", qis, hier_paths,
                     ["--k", "5", "--suppression", "0.05"])

    config = AnonymizationConfig(qis, k=5, suppression=0.05)
    header = csv_module_rows(ADULT / "adult.csv")[0]
    table = old_path_table(ADULT / "adult.csv", [c for c in header if c in qis])
    assert table.codes.flags.c_contiguous  # the old path: row-major
    hier = {a: Hierarchy.read_csv(p, a) for a, p in hier_paths.items()}
    expected = json.loads(json.dumps(analyze(table, hier, config, anonymize(table, hier, config)).to_dict()))
    assert report["suppressed_rows"] > 0  # suppression is exercised
    for part in ("risk", "utility", "distributions"):
        assert report[part] == expected[part], part


@pytest.mark.parametrize("build", ["reader", "from_rows"])
def test_engine_uses_the_column_major_columns_without_copying(build):
    """`encoded()` and `EncodedTable.from_rows` are column-major and the grouper works on
    their columns in place: no n x QIs int32 copy (three of them made the 4.8 M-row run peak
    500 MB higher; strided copies were 0.3 ms of an 8 ms ADULT search)."""
    from fedanon.engine.anonymizer import prepare

    table = columnar_path_table(ADULT / "adult.csv", ADULT_QIS) if build == "reader" else \
        EncodedTable.from_rows(ADULT_QIS, old_path_table(ADULT / "adult.csv", ADULT_QIS).decode_rows())
    assert table.codes.flags.f_contiguous and table.codes.dtype == np.int32
    prep = prepare(table, hierarchies(ADULT, "adult", ADULT_QIS), AnonymizationConfig(ADULT_QIS, k=5))
    for i, ci in enumerate(prep.qi_index):
        assert np.shares_memory(prep.grouper.qi_column(i), table.codes)
        assert np.array_equal(prep.grouper.qi_column(i), table.codes[:, ci])


@pytest.mark.parametrize("ahead", [1, 2])  # batches formatted on threads: written in order however far ahead
@pytest.mark.parametrize("cores", [1, 16])  # 2 formatting threads, or WRITE_THREADS_MAX
@pytest.mark.parametrize("values", [["a", "bb", "1-5", "ü"], ["a", "x;y", ' lead', 'q"t', "multi\nline", ""]])
def test_writer_equals_csv_module_with_and_without_quoting(tmp_path, values, ahead, cores, monkeypatch):
    """Both writer paths (pyarrow's CSV writer when nothing needs quoting, quoted joins
    otherwise), batch boundaries and a row selection against csv.writer."""
    from fedanon.data.io import delimited as csvio
    from fedanon.data.io.delimited import write_columns

    monkeypatch.setattr(csvio, "WRITE_AHEAD_PER_THREAD", ahead)
    monkeypatch.setattr(csvio, "available_cores", lambda: cores)
    assert csvio.write_threads() == (2 if cores == 1 else csvio.WRITE_THREADS_MAX)

    rng = np.random.default_rng(len(values))
    n = 2 * csvio.WRITE_BATCH_ROWS + 17
    codes = [rng.integers(0, len(values), n).astype(np.uint8), rng.integers(0, 3, n).astype(np.int32)]
    dictionaries = [values, [b"x", b"y", b"z"]]
    selection = rng.permutation(n)[: n - 5]
    for rows in (None, selection):
        out = tmp_path / "out.csv"
        written = write_columns(out, ["v", "w"], codes, dictionaries, rows=rows)
        order = np.arange(n) if rows is None else selection
        expected = tmp_path / "expected.csv"
        with open(expected, "w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh, delimiter=";", lineterminator="\n")
            writer.writerow(["v", "w"])
            writer.writerows([[values[codes[0][r]], "xyz"[codes[1][r]]] for r in order])
        assert written == len(order)
        if values[1] == "bb":  # nothing to quote: byte for byte what csv.writer writes
            assert out.read_bytes() == expected.read_bytes()
        got = list(csv.reader(open(out, encoding="utf-8", newline=""), delimiter=";"))
        want = list(csv.reader(open(expected, encoding="utf-8", newline=""), delimiter=";"))
        assert got == want


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_writer_failure_is_an_os_error_not_a_hang():
    """A write that fails midway (disk full) surfaces as OSError; no formatting thread is left behind."""
    import threading

    from fedanon.data.io import delimited as csvio

    n = 3 * csvio.WRITE_BATCH_ROWS
    codes = [np.zeros(n, dtype=np.uint8)]
    before = threading.active_count()
    with pytest.raises(OSError):
        csvio.write_columns("/dev/full", ["v"], codes, [["a"]])
    assert threading.active_count() == before
