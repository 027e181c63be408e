"""Aggregated columns: a numeric attribute released as its equivalence class's aggregate.

Expected values are computed here from the definitions (Fraction, Decimal, statistics,
Counter) over classes read back from the written output, never with the module under test;
one hand table pins the figures literally. Also: the flag, the TOML table and
`anonymize_frame` release the same text; bad declarations end in one line and exit 2;
Protocol B's recipient releases what `anonymize` releases; and no raw value of an
aggregated column reaches the table, the JSON report or the HTML page.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cli_checks import one_line_error
from fedanon.cli import main

FUNCTIONS = ("mean", "median", "interval", "mode")

# sex is the only quasi-identifier; the one 'diverse' row is suppressed under k = 2
ROWS = [("male", "3"), ("female", "10"), ("male", "1"), ("male", "2"), ("female", "7"), ("male", "3"),
        ("female", "7"), ("male", "-1.5"), ("female", "8.5"), ("male", "2"), ("diverse", "100")]
# by hand: male  3, 1, 2, 3, -1.5, 2  -> mean 9.5/6 = 1.58(3), median (2+2)/2, 2 and 3 tie as modes
#          female 10, 7, 7, 8.5      -> mean 32.5/4 = 8.125 (half to even: 8.12), median 7.75
HAND = {"mean": {"male": "1.58", "female": "8.12"},
        "median": {"male": "2", "female": "7.75"},
        "interval": {"male": "[-1.5, 3]", "female": "[7, 10]"},
        "mode": {"male": "2", "female": "7"}}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    table = tmp_path / "t.csv"
    columns = ";".join(f"x_{f}" for f in FUNCTIONS)
    table.write_text(f"name;sex;{columns}\n" + "".join(f"n{i};{s};" + ";".join([x] * 4) + "\n"
                                                      for i, (s, x) in enumerate(ROWS)), encoding="utf-8")
    hierarchy = tmp_path / "sex.csv"
    hierarchy.write_text("male;*\nfemale;*\ndiverse;*\n", encoding="utf-8")
    return {"table": table, "sex": hierarchy, "dir": tmp_path}


def model_flags(files: dict[str, Path]) -> list[str]:
    return ["--qi", f"sex={files['sex']}", "--k", "2", "--suppression", "0.1", "--metric", "loss"]


def aggregate_flags() -> list[str]:
    return [a for f in FUNCTIONS for a in ("--aggregate", f"x_{f}={f}")]


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0].split(";"), [line.split(";") for line in lines[1:]]


# ----------------------------------------------------------------------- the definitions
def number(x: Fraction) -> str:
    """A number as the release writes it: no trailing zeros, integral without '.0'."""
    text = format(Decimal(x.numerator) / Decimal(x.denominator), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def expected(function: str, values: list[str]) -> str:
    xs = [Fraction(v) for v in values]
    if function == "mean":
        mean = sum(xs, Fraction(0)) / len(xs)
        rounded = (Decimal(mean.numerator) / Decimal(mean.denominator)).quantize(Decimal("0.01"), ROUND_HALF_EVEN)
        return number(Fraction(rounded))
    if function == "median":
        return number(statistics.median(xs))
    if function == "interval":
        return f"[{number(min(xs))}, {number(max(xs))}]"
    counts = Counter(xs)
    top = max(counts.values())
    return number(min(x for x, c in counts.items() if c == top))


def check_release(header: list[str], rows: list[list[str]], raw: list[list[str]], qis: list[str],
                  suppressed: int) -> None:
    """Every aggregated cell equals the definition over its class (rows aligned with `raw`)."""
    qi = [header.index(q) for q in qis]
    starred = [r for r in range(len(rows)) if all(rows[r][c] == "*" for c in qi)]
    assert len(starred) == suppressed
    classes: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for r, row in enumerate(rows):
        if r not in starred:
            classes[tuple(row[c] for c in qi)].append(r)
    for f in FUNCTIONS:
        c = header.index(f"x_{f}")
        for r in starred:
            assert rows[r][c] == "*"
        for members in classes.values():
            want = expected(f, [raw[r][c] for r in members])
            assert [rows[r][c] for r in members] == [want] * len(members), (f, members)


# ----------------------------------------------------------------------- tests
def test_each_function_on_the_hand_table(files, tmp_path):
    out, report = tmp_path / "out.csv", tmp_path / "r.json"
    assert main(["anonymize", str(files["table"]), *model_flags(files), *aggregate_flags(),
                 "-o", str(out), "--report", str(report), "--verify", "-q"]) == 0
    header, rows = read_csv(out)
    assert header == ["sex"] + [f"x_{f}" for f in FUNCTIONS]  # 'name' has no role: removed
    raw_header, raw = read_csv(files["table"])
    raw = [[r[raw_header.index(c)] for c in header] for r in raw]
    doc = json.loads(report.read_text())
    assert doc["suppressed_rows"] == 1 and doc["transformation"] == {"sex": 0}
    check_release(header, rows, raw, ["sex"], suppressed=1)
    for f in FUNCTIONS:  # the literal hand values
        c = header.index(f"x_{f}")
        got = {row[0]: row[c] for row in rows if row[0] != "*"}
        assert got == HAND[f]
    # SSE/SST of the mean, by its definition: the suppressed row counts with the overall mean
    xs = [Fraction(x) for _s, x in ROWS]
    mean = sum(xs, Fraction(0)) / len(xs)
    released = {"male": Fraction(158, 100), "female": Fraction(812, 100)}
    sse = sum((x - released.get(s, mean)) ** 2 for (s, _), x in zip(ROWS, xs))
    sst = sum((x - mean) ** 2 for x in xs)
    figures = doc["aggregation"]["x_mean"]
    assert figures["function"] == "mean" and figures["classes"] == 2 and figures["suppressed_rows"] == 1
    assert figures["sse"] == pytest.approx(float(sse)) and figures["sst"] == pytest.approx(float(sst))
    assert figures["sse_sst"] == pytest.approx(float(sse / sst))
    assert doc["columns"]["aggregated"] == {f"x_{f}": f for f in FUNCTIONS}


def test_generalized_classes_on_the_example(tmp_path):
    """Classes formed by generalizing several QIs (zipcode to a prefix), with sensitive attribute."""
    example = Path(__file__).resolve().parents[1] / "fedanon" / "data" / "example"
    table = tmp_path / "e.csv"
    lines = (example / "example.csv").read_text().splitlines()
    table.write_text("\n".join([lines[0] + ";" + ";".join(f"x_{f}" for f in FUNCTIONS)] +
                               [line + ";" + ";".join([line.split(";")[0]] * 4) for line in lines[1:]]) + "\n")
    out = tmp_path / "out.csv"
    assert main(["anonymize", str(table), "--qi", f"sex={example / 'example_hierarchy_sex.csv'}",
                 "--qi", f"zipcode={example / 'example_hierarchy_zipcode.csv'}", "--k", "3",
                 "--sensitive", "diagnosis", "--l-diversity", "distinct:2", *aggregate_flags(),
                 "-o", str(out), "--verify", "-q"]) == 0
    header, rows = read_csv(out)
    raw_header, raw = read_csv(table)
    raw = [[r[raw_header.index(c)] for c in header] for r in raw]
    assert len({(r[header.index("sex")], r[header.index("zipcode")]) for r in rows}) < len(rows)
    check_release(header, rows, raw, ["sex", "zipcode"], suppressed=0)


def test_flag_toml_and_frame_release_the_same(files, tmp_path):
    pd = pytest.importorskip("pandas", reason="pandas is the [frame] extra")
    from fedanon import anonymize_frame
    from fedanon.frame import cell_text

    by_flag, by_toml = tmp_path / "flag.csv", tmp_path / "toml.csv"
    assert main(["anonymize", str(files["table"]), *model_flags(files), *aggregate_flags(),
                 "-o", str(by_flag), "-q"]) == 0
    run = tmp_path / "run.toml"
    run.write_text(f'input = "{files["table"].name}"\noutput = "toml.csv"\nk = 2\nsuppression = 0.1\n'
                   f'metric = "loss"\n[qi]\nsex = "sex.csv"\n[aggregate]\n'
                   + "".join(f'x_{f} = "{f}"\n' for f in FUNCTIONS), encoding="utf-8")
    assert main(["anonymize", "--config", str(run), "-q"]) == 0
    assert by_toml.read_text() == by_flag.read_text()
    df = pd.read_csv(files["table"], sep=";")
    frame, report = anonymize_frame(df, {"sex": files["sex"]}, k=2, suppression=0.1, metric="loss",
                                    aggregate={f"x_{f}": f for f in FUNCTIONS})
    header, rows = read_csv(by_flag)
    assert list(frame.columns) == header
    as_text = [[("*" if pd.isna(v) else cell_text(v)) for v in row] for row in frame.itertuples(index=False)]
    assert as_text == rows
    assert report.to_dict()["aggregation"]["x_mean"]["classes"] == 2
    assert report.aggregation["x_mode"]["function"] == "mode"


def test_simulate_b_releases_what_anonymize_releases(files, tmp_path):
    sim, ref = tmp_path / "sim.csv", tmp_path / "ref.csv"
    flags = [*model_flags(files), *aggregate_flags()]
    assert main(["simulate", "--protocol", "B", "--split", "horizontal", "--parties", "2",
                 str(files["table"]), *flags, "--output", str(sim), "-q"]) == 0
    assert main(["anonymize", str(files["table"]), *flags, "--output", str(ref), "-q"]) == 0
    assert sorted(sim.read_text().splitlines()) == sorted(ref.read_text().splitlines())


@pytest.mark.parametrize("command, protocol", [("anonymize", None), ("simulate", "B"), ("simulate", "C")])
def test_no_raw_value_of_an_aggregated_column_reaches_an_output(tmp_path, command, protocol):
    # class means 1000.5 and 2000.5 differ from every raw value; the suppressed row's 7777.125 too
    values = {"a": ["999.125", "1001.875", "1000.625", "1000.375"], "b": ["2000.25", "2000.75", "1999.5", "2001.5"]}
    table = tmp_path / "t.csv"
    table.write_text("g;x\n" + "".join(f"{g};{v}\n" for g, vs in values.items() for v in vs) + "c;7777.125\n")
    hierarchy = tmp_path / "g.csv"
    hierarchy.write_text("a;*\nb;*\nc;*\n")
    out, report, html = tmp_path / "out.csv", tmp_path / "r.json", tmp_path / "r.html"
    args = [command, str(table), "--qi", f"g={hierarchy}", "--k", "2", "--suppression", "0.2", "--metric", "loss",
            "--aggregate", "x=mean", "-o", str(out), "--report", str(report), "--html", str(html), "-q"]
    if command == "simulate":  # C: the class means come from encrypted class sums
        args[1:1] = ["--protocol", protocol, "--parties", "2"]
    assert main(args) == 0
    assert sorted(out.read_text().splitlines()[1:]) == ["*;*"] + ["a;1000.5"] * 4 + ["b;2000.5"] * 4
    figures = json.loads(report.read_text())["aggregation"]["x"]
    if protocol == "C":  # SSE/SST needs every row's value, which no party of C has
        assert "sse_sst" not in figures and "Protocol C" in figures["computed_by"]
    else:
        assert figures["sse_sst"] > 0
    assert "<h2>Aggregated attributes</h2>" in html.read_text(encoding="utf-8")
    for path in (out, report, html):
        text = path.read_text(encoding="utf-8")
        for raw in [v for vs in values.values() for v in vs] + ["7777.125"]:
            assert raw not in text, (path.name, raw)


@pytest.mark.parametrize("extra, expected", [
    (["--aggregate", "x_mean=avg"], "unknown aggregate function 'avg'"),
    (["--aggregate", "x_mean"], "expected NAME=FUNCTION"),
    (["--aggregate", "sex=mean"], "'sex' is declared aggregated and also a quasi-identifier"),
    (["--aggregate", "x_mean=mean", "--insensitive", "x_mean"], "declared aggregated and also insensitive"),
    (["--aggregate", "x_mean=mean", "--aggregate", "x_mean=median"], "aggregated twice"),
    (["--aggregate", "nope=mean"], "unknown column 'nope' (aggregated)"),
    (["--aggregate", "name=mean"], "line 2: column 'name' must hold numbers, got 'n0'"),
])
def test_bad_declarations_end_in_one_line(files, capsys, extra, expected):
    line = one_line_error(capsys, "anonymize", files["table"], *model_flags(files), *extra,
                          "-o", files["dir"] / "o.csv")
    assert expected in line
    if "numbers" in expected:
        assert str(files["table"]) in line


def test_bad_declarations_in_toml_and_sensitive_role(files, capsys):
    run = files["dir"] / "run.toml"
    run.write_text('aggregate = "x_mean"\n', encoding="utf-8")
    assert "[aggregate] must be a table" in one_line_error(
        capsys, "anonymize", files["table"], "--config", run, *model_flags(files), "-o", files["dir"] / "o.csv")
    run.write_text('[aggregate]\nx_mean = "average"\n', encoding="utf-8")
    line = one_line_error(capsys, "anonymize", files["table"], "--config", run, *model_flags(files),
                          "-o", files["dir"] / "o.csv")
    assert "unknown aggregate function 'average'" in line and str(run) in line
    line = one_line_error(capsys, "anonymize", files["table"], *model_flags(files), "--sensitive", "x_mean",
                          "--l-diversity", "distinct:1", "--aggregate", "x_mean=mean", "-o", files["dir"] / "o.csv")
    assert "also a sensitive attribute" in line


def test_a_non_number_fails_simulate_before_any_party_starts(files, capsys):
    line = one_line_error(capsys, "simulate", "--protocol", "B", files["table"], *model_flags(files),
                          "--aggregate", "name=mean", "-o", files["dir"] / "o.csv")
    assert "line 2: column 'name' must hold numbers" in line


def test_frame_errors_name_the_row_and_the_function():
    pd = pytest.importorskip("pandas", reason="pandas is the [frame] extra")
    from fedanon import anonymize_frame
    from fedanon.errors import InputError

    df = pd.DataFrame({"g": ["a", "a", "b", "b"], "x": [1.0, None, 3.0, 4.0]}, index=[10, 11, 12, 13])
    rows = [["a", "*"], ["b", "*"]]
    with pytest.raises(InputError, match=r"column 'x', row 11: .* got ''"):
        anonymize_frame(df, {"g": rows}, k=2, aggregate={"x": "mean"})
    with pytest.raises(InputError, match="unknown aggregate function 'avg'"):
        anonymize_frame(df.fillna(2.0), {"g": rows}, k=2, aggregate={"x": "avg"})
    with pytest.raises(InputError, match="two roles"):
        anonymize_frame(df.fillna(2.0), {"g": rows}, k=2, insensitive=["x"], aggregate={"x": "mean"})


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-10**6, 10**6), st.integers(0, 4)), min_size=1, max_size=40),
       st.sampled_from(FUNCTIONS))
@example(rows=[(0, -1, 3)], function="mean")  # a mean that rounds to zero from below is written 0, never -0
def test_vectorized_aggregates_equal_the_independent_definition(rows, function):
    """The release's vectorized arithmetic against the verifier's exact one (Fraction, Decimal,
    statistics), on values of 0-4 decimals, negative ones included, classes in any row order."""
    import numpy as np

    from fedanon.microagg.classwise import class_aggregates
    from fedanon.oracle.aggregates import expected_aggregate

    texts = [str(Decimal(m).scaleb(-e)) for _c, m, e in rows]
    labels = np.array([c for c, _m, _e in rows])
    present = sorted(set(labels.tolist()))
    dense = np.searchsorted(present, labels)  # classes 0..g-1 as the grouping numbers them
    got, numbers = class_aggregates(np.array([float(t) for t in texts]), dense, function)
    for g, c in enumerate(present):
        want = expected_aggregate(function, [t for t, lab in zip(texts, labels.tolist()) if lab == c])
        assert got[g] == want, (function, c)
        if function != "interval":
            assert numbers[g] == pytest.approx(float(want))


def test_the_verifier_names_a_wrong_aggregate(files, tmp_path):
    from fedanon.oracle.aggregates import aggregate_violations

    out = tmp_path / "out.csv"
    assert main(["anonymize", str(files["table"]), *model_flags(files), *aggregate_flags(), "-o", str(out), "-q"]) == 0
    raw_header, raw = read_csv(files["table"])
    suppressed = [s == "diverse" for s, _x in ROWS]
    functions = {f"x_{f}": f for f in FUNCTIONS}

    def check() -> list[str]:
        return aggregate_violations(out, ";", raw_header, raw, ["sex"], functions,
                                    written=[True] * len(ROWS), suppressed=suppressed)

    assert check() == []
    text = out.read_text()
    out.write_text(text.replace("1.58", "1.59", 1))  # one male row's mean off by a hundredth
    problems = check()
    assert len(problems) == 1 and "'x_mean' = '1.59'" in problems[0] and "'1.58'" in problems[0]
    out.write_text(text.replace("*;*;*;*;*", "*;*;100;*;*"))  # the suppressed row's raw value
    assert any("suppressed, but 'x_median' holds '100'" in p for p in check())


def test_large_and_finely_divided_values_take_their_exact_or_float_path_in_any_row_order():
    import numpy as np

    from fedanon.microagg.classwise import class_aggregates
    from fedanon.oracle.aggregates import expected_aggregate

    rng = np.random.default_rng(7)
    labels = np.array([0] * 20 + [1] * 20)
    # integers near 3e14: 40 of them sum beyond 2^53 (no exact float sum) yet within int64
    big = [str(3 * 10 ** 14 + int(v)) for v in rng.integers(-10 ** 6, 10 ** 6, 40)]
    fine = [repr(float(v)) for v in rng.normal(0, 1, 40)]  # ~17 significant digits: the float path
    for texts in (big, fine):
        values = np.array([float(t) for t in texts])
        first = None
        for _ in range(3):
            order = rng.permutation(40)
            for function in FUNCTIONS:
                got, _numbers = class_aggregates(values[order], labels[order], function)
                if texts is big:
                    for c in (0, 1):
                        want = expected_aggregate(function, [t for t, lab in zip(texts, labels) if lab == c])
                        assert got[c] == want, function
                elif function == "mean":
                    first = got if first is None else first
                    assert got == first  # the float path sums each class in ascending order
