"""`fedanon risk` and the report's risk figures against an independent plain-Python computation.

The reference below groups rows with a dict of tuples and applies the textbook
formulas (El Emam & Dankar); it shares no code with `fedanon.report.risk`
(which groups with NumPy). The k/ℓ/t a table is said to satisfy are checked
against the independent verifier `engine/verify.py`: the verifier accepts the
reported value and rejects the next stricter one.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import fedanon
from fedanon.cli import main
from fedanon.engine import AnonymizationConfig, LDiversity, TCloseness, read_table_csv
from fedanon.data.hierarchy import Hierarchy
from fedanon.oracle.verify import verify_anonymized

from risk_reference import assert_matches, reference_risk

from datasets import ADULT_DIR
ADULT = ADULT_DIR / "adult.csv"
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
HIER = {q: ADULT_DIR / f"adult_hierarchy_{q}.csv" for q in QIS + ["salary-class"]}
QI_FLAGS = [a for q in QIS for a in ("--qi", f"{q}={HIER[q]}")]


def risk_cli(path, args, tmp_path, capsys):
    out = tmp_path / f"risk_{path.stem}.json"
    code = main(["risk", str(path), *map(str, args), "--json", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 0, err
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def adult_k5(tmp_path_factory):
    """The k=5 optimum of ADULT (2 % suppression), with its JSON report."""
    tmp = tmp_path_factory.mktemp("adult_k5")
    out, rep = tmp / "out.csv", tmp / "report.json"
    code = main(["anonymize", str(ADULT), *QI_FLAGS, "--k", "5", "--suppression", "0.02",
                 "--output", str(out), "--report", str(rep), "--quiet"])
    assert code == 0
    return out, json.loads(rep.read_text())


def test_raw_adult_risk_matches_reference(tmp_path, capsys):
    header, rows = read_table_csv(ADULT)
    ours = risk_cli(ADULT, ["--qi", ",".join(QIS)], tmp_path, capsys)
    ref = reference_risk(header, rows, QIS)
    assert_matches(ours, ref)
    assert ours["sample_uniques"] > 10000 and ours["prosecutor"]["highest"] == 1.0  # ADULT is mostly unique
    assert ours["satisfies"]["k"] == 1


def test_adult_k5_optimum_risk_matches_reference(adult_k5, tmp_path, capsys):
    out, report = adult_k5
    oh, orows = read_table_csv(out)
    ours = risk_cli(out, ["--qi", ",".join(QIS), "--threshold", "0.1"], tmp_path, capsys)
    ref = reference_risk(oh, orows, QIS, threshold=0.1)
    assert_matches(ours, ref)
    assert ours["satisfies"]["k"] >= 5 and ours["prosecutor"]["highest"] <= 0.2
    assert ours["suppressed_rows"] == report["suppressed_rows"] > 0
    # the anonymization report carries the same figures for its output and input
    assert report["risk"]["output"]["classes"] == ref["classes"] == report["classes"]
    assert report["risk"]["output"]["prosecutor"]["average"] == pytest.approx(ref["classes"] / ref["rows"])
    header, rows = read_table_csv(ADULT)
    raw = reference_risk(header, rows, QIS)
    assert report["risk"]["input"]["sample_uniques"] == raw["sample_uniques"]
    assert report["risk"]["input"]["prosecutor"]["records_at_risk"] == raw["prosecutor"]["records_at_risk"]


def test_population_table_gives_journalist_and_marketer(tmp_path, capsys):
    header, rows = read_table_csv(ADULT)
    qis = ["sex", "race", "marital-status"]
    sample = rows[::7]
    sample_csv = tmp_path / "sample.csv"
    sample_csv.write_text(";".join(header) + "\n" + "".join(";".join(r) + "\n" for r in sample))
    ours = risk_cli(sample_csv, ["--qi", ",".join(qis), "--population", ADULT], tmp_path, capsys)
    ref = reference_risk(header, sample, qis, population_rows=rows)
    assert_matches(ours, ref)
    assert ours["journalist"]["highest"] < ours["prosecutor"]["highest"]  # the population hides the sample
    assert "population table" in ours["population"]


def test_without_population_journalist_is_prosecutor(tmp_path, capsys):
    ours = risk_cli(ADULT, ["--qi", "sex,race,age"], tmp_path, capsys)
    assert ours["journalist"] == ours["prosecutor"]
    assert ours["marketer"]["average"] == pytest.approx(ours["classes"] / ours["rows"])


@pytest.mark.slow
def test_k_l_t_reported_for_an_output_are_what_the_verifier_checks(tmp_path, capsys):
    """The verifier accepts the reported k, ℓ, t and rejects the next stricter value.

    Runs on every third ADULT row: the verifier is row-by-row Python and runs 13 times here.
    """
    header, rows = read_table_csv(ADULT)
    data = tmp_path / "adult_third.csv"
    data.write_text(";".join(header) + "\n" + "".join(";".join(r) + "\n" for r in rows[::3]))
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    code = main(["anonymize", str(data), *QI_FLAGS, "--sensitive", f"salary-class={HIER['salary-class']}",
                 "--k", "4", "--l-diversity", "distinct:2", "--t-closeness", "0.3:hierarchical",
                 "--suppression", "0.05", "--output", str(out), "--report", str(rep), "--quiet"])
    assert code == 0, capsys.readouterr().err
    report = json.loads(rep.read_text())
    risk = risk_cli(out, ["--qi", ",".join(QIS), "--sensitive", f"salary-class={HIER['salary-class']}"],
                    tmp_path, capsys)
    sat = risk["satisfies"]
    s = sat["sensitive"]["salary-class"]
    header, rows = read_table_csv(data)
    oh, orows = read_table_csv(out)
    hier = {a: Hierarchy.read_csv(p, a) for a, p in HIER.items()}

    def problems(**model):
        config = AnonymizationConfig(QIS, suppression=0.05, **model)
        return verify_anonymized(header, rows, oh, orows, config, hier,
                                 transformation=report["transformation"],
                                 reported_suppressed_rows=report["suppressed_rows"])

    assert sat["k"] >= 4 and s["distinct_l"] >= 2 and s["t_hierarchical"] <= 0.3 + 1e-9
    assert problems(k=sat["k"]) == [] and problems(k=sat["k"] + 1)
    for variant, value, stricter in (("distinct", s["distinct_l"], s["distinct_l"] + 1),
                                     ("entropy", s["entropy_l"], s["entropy_l"] * (1 + 1e-6))):
        assert problems(l_diversity=LDiversity(variant, value, "salary-class")) == []
        assert problems(l_diversity=LDiversity(variant, stricter, "salary-class"))
    c = s["recursive_c"]["2"]
    assert problems(l_diversity=LDiversity("recursive", 2, "salary-class", c=c * (1 + 1e-9))) == []
    assert problems(l_diversity=LDiversity("recursive", 2, "salary-class", c=c))  # needs c strictly above
    for kind in ("equal", "hierarchical"):
        t = s[f"t_{kind}"]
        assert problems(t_closeness=TCloseness(t, kind, "salary-class")) == []
        assert problems(t_closeness=TCloseness(t - 1e-6, kind, "salary-class"))
    # and the anonymization report states the same for its own output
    assert report["risk"]["output"]["satisfies"] == sat


def test_bad_input_one_line(tmp_path, capsys):
    assert main(["risk", str(ADULT), "--qi", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown column 'nope'" in err and len(err.strip().splitlines()) == 1
    assert main(["risk", str(ADULT), "--qi", "sex", "--threshold", "2"]) == 2
    assert "threshold" in capsys.readouterr().err


def test_released_table_against_its_raw_population(adult_k5, tmp_path, capsys):
    """--qi NAME=H.csv generalizes the raw population to the released table's levels."""
    out, report = adult_k5
    header, rows = read_table_csv(ADULT)
    oh, orows = read_table_csv(out)
    sample = orows[::4]
    sample_csv = tmp_path / "released_sample.csv"
    sample_csv.write_text(";".join(oh) + "\n" + "".join(";".join(r) + "\n" for r in sample))
    ours = risk_cli(sample_csv, [*QI_FLAGS, "--population", ADULT], tmp_path, capsys)
    # reference: generalize the raw population by reading the hierarchy files directly
    gen = {}
    for q in QIS:
        level = report["transformation"][q]
        lines = [line.split(";") for line in HIER[q].read_text().splitlines() if line]
        gen[q] = {cells[0]: cells[level] for cells in lines}
    population = [[gen[c][v] if c in gen else v for c, v in zip(header, r)] for r in rows]
    ref = reference_risk(oh, sample, QIS, population_rows=population)
    assert_matches(ours, ref)
    assert ours["journalist"]["highest"] <= 0.2 < ours["prosecutor"]["highest"]


def test_report_and_population_errors_are_one_line(tmp_path, capsys):
    ex = Path(fedanon.__file__).parent / "data" / "example"
    qi = [a for q in ("age", "sex", "zipcode") for a in ("--qi", f"{q}={ex / f'example_hierarchy_{q}.csv'}")]
    code = main(["anonymize", str(ex / "example.csv"), *qi, "--k", "2", "--output", str(tmp_path / "o.csv"),
                 "--html", str(tmp_path / "no" / "such" / "dir" / "r.html"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "r.html: cannot write" in err and len(err.strip().splitlines()) == 1, err
    population = tmp_path / "pop.csv"
    population.write_text("age;sex;zipcode;diagnosis\n34;male;82667;flu\n")
    code = main(["risk", str(ex / "example.csv"), "--qi", "age,sex", "--population", str(population)])
    err = capsys.readouterr().err
    assert code == 2 and "population table lacks the class" in err and len(err.strip().splitlines()) == 1, err


def test_rows_generalized_to_star_by_the_transformation_are_released(tmp_path, capsys):
    """k = 8 on the 8-row example: the optimum takes age and sex to '*' and suppresses nothing.
    The report's suppressed_rows (0) makes those all-'*' rows one released class; without it the
    file alone follows the writer's convention (all-'*' = suppressed)."""
    ex = Path(fedanon.__file__).parent / "data" / "example"
    out, rep = tmp_path / "o.csv", tmp_path / "r.json"
    assert main(["anonymize", str(ex / "example.csv"), "--qi", f"age={ex / 'example_hierarchy_age.csv'}",
                 "--qi", f"sex={ex / 'example_hierarchy_sex.csv'}", "--sensitive", "diagnosis", "--l-diversity", "distinct:2", "--k", "8",
                 "--output", str(out), "--report", str(rep), "--quiet"]) == 0
    oh, orows = read_table_csv(out)
    assert all(r[oh.index("age")] == "*" and r[oh.index("sex")] == "*" for r in orows)  # the case at hand
    assert json.loads(rep.read_text())["suppressed_rows"] == 0
    _, raw = read_table_csv(ex / "example.csv")
    diagnoses = {r[3] for r in raw}  # one class of all rows: distinct l = distinct diagnoses in the input
    ours = risk_cli(out, ["--qi", "age,sex", "--sensitive", "diagnosis", "--report", rep], tmp_path, capsys)
    assert (ours["rows"], ours["suppressed_rows"], ours["classes"]) == (len(raw), 0, 1)
    assert ours["satisfies"]["k"] == len(raw) and ours["prosecutor"]["highest"] == pytest.approx(1 / len(raw))
    assert ours["satisfies"]["sensitive"]["diagnosis"]["distinct_l"] == len(diagnoses)
    assert risk_cli(out, ["--qi", "age,sex", "--suppressed-rows", "0"], tmp_path, capsys)["rows"] == len(raw)
    convention = risk_cli(out, ["--qi", "age,sex"], tmp_path, capsys)
    assert (convention["rows"], convention["suppressed_rows"]) == (0, len(raw))


def test_some_star_rows_suppressed_some_released(tmp_path, capsys):
    """'?' generalizes to '*' at level 1, where a singleton class is suppressed as well: the report's
    count leaves one released all-'*' class of the right size; l/t are then not reported."""
    data, hier = tmp_path / "t.csv", tmp_path / "h.csv"
    data.write_text("a;s\n?;u\n?;v\nx;u\ny;v\nz;u\n")
    hier.write_text("?;*;*\nx;g1;*\ny;g1;*\nz;g2;*\n")
    out, rep = tmp_path / "o.csv", tmp_path / "r.json"
    assert main(["anonymize", str(data), "--qi", f"a={hier}", "--insensitive", "s", "--k", "2", "--suppression", "0.2",
                 "--output", str(out), "--report", str(rep), "--quiet"]) == 0
    report = json.loads(rep.read_text())
    assert report["transformation"] == {"a": 1} and report["suppressed_rows"] == 1
    # reference: generalize by the hierarchy file, suppress classes below k, count what is left
    gen = {line.split(";")[0]: line.split(";")[1] for line in hier.read_text().splitlines()}
    classes = Counter(gen[line.split(";")[0]] for line in data.read_text().splitlines()[1:])
    released = {c: n for c, n in classes.items() if n >= 2}
    ours = risk_cli(out, ["--qi", "a", "--sensitive", "s", "--report", rep], tmp_path, capsys)
    assert ours["rows"] == sum(released.values()) == 4 and ours["classes"] == len(released) == 2
    assert ours["suppressed_rows"] == 1 and ours["satisfies"]["k"] == min(released.values())
    assert ours["satisfies"]["sensitive"] == {} and "not reported" in ours["note"]


def test_suppressed_count_errors_are_one_line(tmp_path, capsys):
    ex = Path(fedanon.__file__).parent / "data" / "example"
    bad = tmp_path / "bad.json"
    bad.write_text('{"transformation": {}}')
    for extra, expected in ((["--report", str(bad)], "no suppressed_rows count"),
                            (["--report", str(tmp_path / "missing.json")], "cannot read"),
                            (["--suppressed-rows", "3"], "has 0 rows with '*'"),
                            (["--suppressed-rows", "-1"], "0 or more")):
        assert main(["risk", str(ex / "example.csv"), "--qi", "age,sex", *extra]) == 2
        err = capsys.readouterr().err
        assert expected in err and len(err.strip().splitlines()) == 1, err


def test_report_of_a_run_that_dropped_suppressed_rows(adult_k5, tmp_path, capsys):
    """--drop-suppressed writes no suppressed row: the report's count for the file is 0."""
    out = tmp_path / "dropped.csv"
    rep = tmp_path / "dropped.json"
    assert main(["anonymize", str(ADULT), *QI_FLAGS, "--k", "5", "--suppression", "0.02", "--drop-suppressed",
                 "--output", str(out), "--report", str(rep), "--quiet"]) == 0
    report = json.loads(rep.read_text())
    assert report["suppressed_rows"] > 0 == report["suppressed_rows_in_output"]
    ours = risk_cli(out, ["--qi", ",".join(QIS), "--report", rep], tmp_path, capsys)
    kept, full = adult_k5
    oh, orows = read_table_csv(kept)
    assert_matches(ours, reference_risk(oh, orows, QIS))  # the same released classes as the full file
