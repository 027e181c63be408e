"""`fedanon anonymize` end to end: reference facts, TOML runs, outputs, errors.

Every output table written here is re-checked by the independent verifier.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from fedanon.cli import main
from fedanon.model.config import AnonymizationConfig
from fedanon.data.io.delimited import read_table_csv
from fedanon.data.hierarchy import Hierarchy
from fedanon.oracle.verify import verify_anonymized

from datasets import DATA_DIR as DATA
EX = DATA / "example"
ADULT = DATA / "adult"
EX_QI = ["--qi", f"age={EX / 'example_hierarchy_age.csv'}", "--qi", f"sex={EX / 'example_hierarchy_sex.csv'}",
         "--qi", f"zipcode={EX / 'example_hierarchy_zipcode.csv'}"]
SENS = ["--sensitive", f"diagnosis={EX / 'example_hierarchy_diagnosis.csv'}"]


def run_cli(args, capsys):
    code = main(["anonymize", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def verify_files(input_csv, out_csv, report, hier_paths):
    """Re-check a written output with the verifier (rows aligned: nothing dropped)."""
    header, rows = read_table_csv(input_csv)
    oh, orows = read_table_csv(out_csv)
    # undeclared (identifying) columns are removed: check the released columns only
    assert oh == [c for c in header if c in oh], (oh, header)
    idx = [header.index(c) for c in oh]
    header, rows = oh, [[r[i] for i in idx] for r in rows]
    cfg = AnonymizationConfig.from_dict(report["config"])
    hier = {a: Hierarchy.read_csv(p, a) for a, p in hier_paths.items()}
    return verify_anonymized(header, rows, oh, orows, cfg, hier,
                             transformation=report["transformation"],
                             reported_suppressed_rows=report["suppressed_rows"])


def ex_hier(with_sensitive=False):
    d = {a: EX / f"example_hierarchy_{a}.csv" for a in ("age", "sex", "zipcode")}
    if with_sensitive:
        d["diagnosis"] = EX / "example_hierarchy_diagnosis.csv"
    return d


def test_example_2_anonymity_optimum_103(tmp_path, capsys):
    out, rep = tmp_path / "out.csv", tmp_path / "r.json"
    code, stdout, err = run_cli([EX / "example.csv", *EX_QI, "--k", "2", "--output", out, "--report", rep], capsys)
    assert code == 0, err
    report = json.loads(rep.read_text())
    assert report["transformation"] == {"age": 1, "sex": 0, "zipcode": 3}
    for key in ("suppressed_rows", "information_loss", "metric", "classes", "checks", "rollups", "elapsed_s"):
        assert key in report
    assert report["metric"] == "nonuniform-entropy" and report["classes"] == 4
    assert "transformation" in stdout  # summary table
    assert verify_files(EX / "example.csv", out, report, ex_hier()) == []
    _, rows = read_table_csv(out)
    assert sorted(r[2] for r in rows) == ["81***"] * 4 + ["82***"] * 4


def test_example_recursive_4_2_diversity_25pct_aecs_reference_fact(tmp_path, capsys):
    out, rep = tmp_path / "out.csv", tmp_path / "r.json"
    code, _, err = run_cli([EX / "example.csv", *EX_QI, *SENS, "--l-diversity", "recursive:4,2",
                            "--suppression", "0.25", "--metric", "aecs", "--output", out, "--report", rep,
                            "--verify", "--quiet"], capsys)
    assert code == 0, err
    report = json.loads(rep.read_text())
    assert report["transformation"] == {"age": 1, "sex": 0, "zipcode": 3}
    assert report["suppressed_rows"] <= 2 and report["verified"] is True
    assert verify_files(EX / "example.csv", out, report, ex_hier(True)) == []


@pytest.mark.parametrize("flags", [
    ["--l-diversity", "distinct:2"],
    ["--l-diversity", "entropy:1.5", "--suppression", "0.25"],
    ["--t-closeness", "0.2:equal"],
    ["--t-closeness", "0.2:hierarchical", "--k", "2"],
    ["--t-closeness", "0.3:hierarchical", "--suppression", "0.4", "--metric", "discernibility"],
])
def test_example_other_models_are_verified(tmp_path, capsys, flags):
    out, rep = tmp_path / "out.csv", tmp_path / "r.json"
    code, _, err = run_cli([EX / "example.csv", *EX_QI, *SENS, *flags, "--output", out, "--report", rep,
                            "--verify", "-q"], capsys)
    assert code == 0, err
    report = json.loads(rep.read_text())
    assert report["verified"] is True, report.get("violations")
    assert verify_files(EX / "example.csv", out, report, ex_hier(True)) == []


def test_drop_suppressed_leaves_rows_out(tmp_path, capsys):
    out, rep = tmp_path / "out.csv", tmp_path / "r.json"
    code, _, err = run_cli([EX / "example.csv", *EX_QI, *SENS, "--l-diversity", "recursive:4,2",
                            "--suppression", "0.25", "--metric", "aecs",
                            "--output", out, "--report", rep, "--drop-suppressed", "--verify", "-q"], capsys)
    assert code == 0, err
    report = json.loads(rep.read_text())
    assert report["verified"] is True  # checked on the full table before rows were dropped
    _, rows = read_table_csv(out)
    assert report["suppressed_rows"] == 2  # the two rows of the 61-99/male/81*** class (both pneumonia? no: 1:1)
    assert len(rows) == 6 == report["rows_written"]
    assert all(r[0] != "*" for r in rows)


def test_toml_run_file_with_relative_paths_and_cli_override(tmp_path, capsys, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(EX, data)
    (tmp_path / "run.toml").write_text(
        'input = "data/example.csv"\noutput = "out/anon.csv"\nreport = "out/report.json"\n'
        'k = 2\nmetric = "aecs"\n\n[qi]\nage = "data/example_hierarchy_age.csv"\n'
        'sex = "data/example_hierarchy_sex.csv"\nzipcode = "data/example_hierarchy_zipcode.csv"\n'
    )
    (tmp_path / "out").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, _, err = run_cli(["--config", tmp_path / "run.toml", "-q"], capsys)
    assert code == 0, err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["metric"] == "aecs" and report["config"]["k"] == 2
    # command-line flags override the file
    code, _, err = run_cli(["--config", tmp_path / "run.toml", "--k", "4", "--metric", "height", "-q"], capsys)
    assert code == 0, err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["config"]["k"] == 4 and report["metric"] == "height"
    assert verify_files(data / "example.csv", tmp_path / "out" / "anon.csv", report,
                        {a: data / f"example_hierarchy_{a}.csv" for a in ("age", "sex", "zipcode")}) == []


def test_delta_presence_writes_only_the_research_subset(tmp_path, capsys):
    header, rows = read_table_csv(EX / "example.csv")
    male = [r for r in rows if r[1] == "male"]
    subset = tmp_path / "subset.csv"
    subset.write_text(";".join(header) + "\n" + "".join(";".join(r) + "\n" for r in male))
    out, rep = tmp_path / "out.csv", tmp_path / "r.json"
    code, _, err = run_cli([EX / "example.csv", *EX_QI, "--delta-presence", f"0,0.5:{subset}",
                            "--insensitive", "diagnosis", "--output", out, "--report", rep, "--verify", "-q"], capsys)
    assert code == 0, err
    report = json.loads(rep.read_text())
    assert report["verified"] is True, report.get("violations")
    _, written = read_table_csv(out)
    assert len(written) == len(male) == report["rows_written"] == report["research_subset_rows"]
    assert report["suppressed_subset_rows"] == sum(1 for r in written if r[2] == "*")  # zip top is *****
    assert sorted(r[3] for r in written) == sorted(r[3] for r in male)


# ----------------------------------------------------------------------------- errors
def _expect_error(capsys, args, *needles):
    code, _, err = run_cli(args, capsys)
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_error_value_missing_from_hierarchy(tmp_path, capsys):
    bad = tmp_path / "in.csv"
    text = (EX / "example.csv").read_text().replace("66;male", "67;male")
    bad.write_text(text)
    _expect_error(capsys, [bad, *EX_QI, "--k", "2", "-o", tmp_path / "o.csv"], str(bad), "line 4", "'67'", "age")


def test_error_non_monotone_and_ragged_hierarchy(tmp_path, capsys):
    nonmono = tmp_path / "age.csv"
    nonmono.write_text((EX / "example_hierarchy_age.csv").read_text().replace("21;20-60;*", "21;20-60;adult"))
    qi = ["--qi", f"age={nonmono}", "--qi", f"sex={EX / 'example_hierarchy_sex.csv'}"]
    _expect_error(capsys, [EX / "example.csv", *qi, "-o", tmp_path / "o.csv"], str(nonmono), "line", "monotone")
    ragged = tmp_path / "sex.csv"
    ragged.write_text("male;*\nfemale\n")
    qi = ["--qi", f"sex={ragged}"]
    _expect_error(capsys, [EX / "example.csv", *qi, "-o", tmp_path / "o.csv"], str(ragged), "line 2", "female")


def test_error_unknown_column(tmp_path, capsys):
    qi = ["--qi", f"height={EX / 'example_hierarchy_age.csv'}"]
    _expect_error(capsys, [EX / "example.csv", *qi, "-o", tmp_path / "o.csv"], "example.csv", "'height'")


@pytest.mark.parametrize("flag,value,needle", [
    ("--k", "0", "k must be"), ("--k", "-3", "k must be"),
    ("--suppression", "1.0", "suppression"), ("--suppression", "-0.1", "suppression"),
])
def test_error_bad_parameters(tmp_path, capsys, flag, value, needle):
    _expect_error(capsys, [EX / "example.csv", *EX_QI, flag, value, "-o", tmp_path / "o.csv"], needle, value)


def test_error_empty_files(tmp_path, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    _expect_error(capsys, [empty, *EX_QI, "-o", tmp_path / "o.csv"], str(empty), "empty")
    qi = ["--qi", f"age={empty}"]
    _expect_error(capsys, [EX / "example.csv", *qi, "-o", tmp_path / "o.csv"], str(empty), "empty")


def test_error_ragged_input_and_bad_subset(tmp_path, capsys):
    ragged = tmp_path / "in.csv"
    ragged.write_text((EX / "example.csv").read_text().replace("45;female;81775;pneumonia", "45;female;81775"))
    _expect_error(capsys, [ragged, *EX_QI, "-o", tmp_path / "o.csv"], str(ragged), "line 3")
    subset = tmp_path / "subset.csv"
    subset.write_text("age;sex;zipcode;diagnosis\n34;male;82667;pneumonia\n34;male;82667;pneumonia\n")
    _expect_error(capsys, [EX / "example.csv", *EX_QI, "--delta-presence", f"0,0.5:{subset}",
                           "-o", tmp_path / "o.csv"], str(subset), "line 3", "does not occur")


def test_error_model_flags(tmp_path, capsys):
    o = ["-o", tmp_path / "o.csv"]
    _expect_error(capsys, [EX / "example.csv", *EX_QI, "--l-diversity", "distinct:2", *o], "--sensitive")
    _expect_error(capsys, [EX / "example.csv", *EX_QI, "--sensitive", "diagnosis",
                           "--t-closeness", "0.2:hierarchical", *o], "hierarchy")
    _expect_error(capsys, [EX / "example.csv", *EX_QI, *SENS, "--l-diversity", "fancy:2", *o], "fancy")
    _expect_error(capsys, [EX / "example.csv", *EX_QI, *SENS, "--t-closeness", "1.5:equal", *o], "1.5")


def test_console_script_error_is_one_line_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fedanon", "anonymize", str(EX / "example.csv"), *EX_QI,
                           "--k", "0", "-o", str(tmp_path / "o.csv")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert "k must be" in proc.stderr


def test_adult_k5_optimum_through_the_cli(tmp_path, capsys):
    attrs = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
             "occupation", "salary-class"]
    qi = [x for a in attrs for x in ("--qi", f"{a}={ADULT / f'adult_hierarchy_{a}.csv'}")]
    out, rep = tmp_path / "out.csv", tmp_path / "r.json"
    code, _, err = run_cli([ADULT / "adult.csv", *qi, "--k", "5", "-o", out, "--report", rep, "-q"], capsys)
    assert code == 0, err
    report = json.loads(rep.read_text())
    assert [report["transformation"][a] for a in attrs] == [1, 2, 1, 1, 3, 2, 2, 1, 1]
    assert report["classes"] == 48 and report["suppressed_rows"] == 0
    assert verify_files(ADULT / "adult.csv", out, report,
                        {a: ADULT / f"adult_hierarchy_{a}.csv" for a in attrs}) == []


def test_error_unknown_metric_lists_the_choices(tmp_path, capsys):
    line = _expect_error(capsys, [EX / "example.csv", *EX_QI, "--metric", "fast", "-o", tmp_path / "o.csv"],
                         "'fast'")
    assert "nonuniform-entropy" in line and "discernibility-star" in line


def test_subset_rows_match_as_a_multiset(tmp_path):
    from fedanon.data.prepare import match_subset
    from fedanon.errors import InputError

    from fedanon.data.io.delimited import read_columns

    source = tmp_path / "in.csv"
    source.write_text("a;b\n1;x\n2;y\n1;x\n3;z\n")
    table = read_columns(source)
    sub = tmp_path / "s.csv"
    sub.write_text("a;b\n1;x\n3;z\n1;x\n")
    assert match_subset(table, sub).tolist() == [True, False, True, True]
    sub.write_text("a;b\n1;x\n1;x\n1;x\n")  # three copies, the input has two
    with pytest.raises(InputError, match=r"s.csv, line 4: row '1;x' does not occur"):
        match_subset(table, sub)
    sub.write_text("a;b\n1;x\n\n1;q\n")  # a value the input never has, after a blank line
    with pytest.raises(InputError, match=r"s.csv, line 4: row '1;q' does not occur"):
        match_subset(table, sub)
    sub.write_text("b;a\n1;x\n")
    with pytest.raises(InputError, match="header"):
        match_subset(table, sub)


def test_progress_bar_only_on_a_terminal(monkeypatch):
    import io

    from fedanon.cli import anonymize as cli

    update, stop = cli._progress_factory(quiet=False)  # pytest's stderr is not a TTY
    assert update is None
    stop()

    class FakeTTY(io.StringIO):
        def isatty(self) -> bool:
            return True

    fake = FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake)
    update, stop = cli._progress_factory(quiet=False)
    assert update is not None
    update(5, 36)
    update(36, 36)
    stop()
    assert cli._progress_factory(quiet=True)[0] is None


def test_error_unwritable_output(tmp_path, capsys):
    _expect_error(capsys, [EX / "example.csv", *EX_QI, "-o", tmp_path / "missing" / "o.csv"],
                  "missing/o.csv", "cannot write")
    _expect_error(capsys, [EX / "example.csv", *EX_QI, "-o", tmp_path / "o.csv",
                           "--report", tmp_path / "nope" / "r.json"], "nope/r.json", "cannot write")
    # the output is written on a second thread while the report is computed: its failure must
    # still be the command's one error line, and no report may claim a release that failed
    _expect_error(capsys, [EX / "example.csv", *EX_QI, "-o", tmp_path / "missing" / "o.csv",
                           "--report", tmp_path / "r.json", "--html", tmp_path / "r.html"],
                  "missing/o.csv", "cannot write")
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "r.html").exists()


def test_verify_flag_fails_on_a_doctored_engine_result(tmp_path, capsys, monkeypatch):
    """--verify must not trust the engine: a result that breaks k is reported, exit code 1."""
    import fedanon.engine as engine

    real = engine.anonymize

    def doctored(table, hierarchies, config, **kw):
        res = real(table, hierarchies, config, **kw)
        zc = table.column_index("zipcode")
        res.output.dictionaries[zc] = list(res.output.dictionaries[zc]) + [b"82667"]
        codes = res.output.codes.copy()
        codes[0, zc] = len(res.output.dictionaries[zc]) - 1  # row 1 gets its raw zipcode back
        res.output.codes = codes
        return res

    monkeypatch.setattr(engine, "anonymize", doctored)
    rep = tmp_path / "r.json"
    code, _, err = run_cli([EX / "example.csv", *EX_QI, "--k", "2", "-o", tmp_path / "o.csv", "--report", rep,
                            "--verify", "-q"], capsys)
    assert code == 1
    assert "verifier found violations" in err and "zipcode" in err
    assert json.loads(rep.read_text())["verified"] is False
