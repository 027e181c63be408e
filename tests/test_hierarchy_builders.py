"""Hierarchy builders round-trip through the engine: accepted, monotone, covering the data.

Monotonicity and coverage are re-checked here in plain Python from the written
CSV (not via `Hierarchy.from_rows`, which the builders themselves call), and the
labels are checked against their meaning (an interval contains its value, a mask
keeps the value's prefix, a date label names the date's month/year/decade).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from fedanon.cli import main
from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, anonymize, read_table_csv
from fedanon.oracle.verify import verify_result
from fedanon.errors import InputError
from fedanon.data.builders import date_hierarchy, interval_hierarchy, mask_hierarchy, order_hierarchy

from datasets import DATA_DIR as DATA
ADULT = DATA / "adult" / "adult.csv"
EXAMPLE = DATA / "example" / "example.csv"


def read_rows(path: Path) -> list[list[str]]:
    return [line.split(";") for line in path.read_text(encoding="utf-8").splitlines() if line]


def assert_monotone_and_covering(rows: list[list[str]], data_values: set[str]) -> None:
    heights = {len(r) for r in rows}
    assert len(heights) == 1, "ragged"
    assert {r[-1] for r in rows} == {"*"}, "top level must be '*'"
    assert data_values <= {r[0] for r in rows}, f"missing: {sorted(data_values - {r[0] for r in rows})[:5]}"
    assert len({r[0] for r in rows}) == len(rows), "a value listed twice"
    for level in range(len(rows[0]) - 1):
        parent: dict[str, set[str]] = defaultdict(set)
        for r in rows:
            parent[r[level]].add(r[level + 1])
        bad = {v: p for v, p in parent.items() if len(p) > 1}
        assert not bad, f"level {level} not monotone: {list(bad.items())[:3]}"


def cli(args: list[str], capsys) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def column(path: Path, name: str) -> list[str]:
    header, rows = read_table_csv(path)
    return [r[header.index(name)] for r in rows]


def engine_round_trip(path: Path, qis: dict[str, Path], k: int) -> None:
    header, rows = read_table_csv(path)
    table = EncodedTable.from_rows(header, rows)
    hier = {q: Hierarchy.read_csv(p, q) for q, p in qis.items()}
    config = AnonymizationConfig(list(qis), k=k, suppression=0.02)
    result = anonymize(table, hier, config)
    assert verify_result(table, hier, config, result) == []
    # a k that the raw data violates forces at least one QI above level 0: the built levels are used
    assert any(level > 0 for level in result.transformation.values())


def test_cli_builders_from_adult_round_trip_through_engine(tmp_path, capsys):
    out = {name: tmp_path / f"{name}.csv" for name in ("age", "native-country", "education", "occupation")}
    assert cli(["hierarchy", "interval", "--from", ADULT, "--column", "age", "--output", out["age"]], capsys)[0] == 0
    assert cli(["hierarchy", "order", "--from", ADULT, "--column", "native-country", "--fanout", "4",
                "--output", out["native-country"]], capsys)[0] == 0
    assert cli(["hierarchy", "auto", "--from", ADULT, "--column", "education", "--output", out["education"]],
               capsys)[0] == 0
    assert cli(["hierarchy", "mask", "--from", ADULT, "--column", "occupation", "--step", "3",
                "--output", out["occupation"]], capsys)[0] == 0
    for name, path in out.items():
        assert_monotone_and_covering(read_rows(path), set(column(ADULT, name)))
    engine_round_trip(ADULT, out, k=10)


def test_interval_labels_contain_their_values_and_widths_grow():
    values = [str(v) for v in range(17, 91)]
    h = interval_hierarchy("age", values, width=5, fanout=[2, 3], bottom=20, top=80)
    rows = [[c.decode() for c in r] for r in h.rows]
    assert_monotone_and_covering(rows, set(values))
    widths_seen = defaultdict(set)
    for r in rows:
        x = int(r[0])
        for level, label in enumerate(r[1:-1], start=1):
            if x < 20:
                assert label == "<20"
            elif x >= 80:
                assert label == ">=80"
            else:
                a, b = map(float, re.fullmatch(r"\[(-?[\d.]+), (-?[\d.]+)\[", label).groups())
                assert a <= x < b, (x, label)
                widths_seen[level].add(b - a)
    assert widths_seen[1] == {5.0} and max(widths_seen[2]) == 10.0 and max(widths_seen[3]) == 30.0


def test_explicit_widths_must_nest():
    with pytest.raises(InputError, match="multiple"):
        interval_hierarchy("x", ["1", "2", "30"], widths=[2, 3])
    with pytest.raises(InputError, match="not a number"):
        interval_hierarchy("x", ["1", "abc"])


def test_mask_keeps_prefix_and_length():
    values = ["81667", "81675", "82451", "1234", "?"]
    h = mask_hierarchy("zip", values)
    rows = [[c.decode() for c in r] for r in h.rows]
    assert_monotone_and_covering(rows, set(values))
    for r in rows:
        if r[0] == "?":
            assert r[:-1] == ["?"] * (len(r) - 1)  # missing values keep their own branch
            continue
        for j, label in enumerate(r[1:-1], start=1):
            hidden = min(j, len(r[0]))
            assert len(label) == len(r[0]) and label == r[0][:len(r[0]) - hidden] + "*" * hidden


def test_order_groups_neighbours_in_the_given_order():
    order = ["Preschool", "1st-4th", "5th-6th", "HS-grad", "Bachelors", "Masters", "Doctorate"]
    h = order_hierarchy("edu", order[::-1], order=order, fanout=[2, 2])
    rows = {r[0].decode(): [c.decode() for c in r] for r in h.rows}
    assert rows["Preschool"][1] == "Preschool..1st-4th" and rows["Doctorate"][1] == "Doctorate"
    assert rows["HS-grad"][2] == "Preschool..HS-grad"
    with pytest.raises(InputError, match="not in the given order"):
        order_hierarchy("edu", ["PhD"], order=order)


def test_date_levels_name_month_year_decade():
    values = ["2019-12-31", "2020-01-01", "1987-06-15"]
    h = date_hierarchy("d", values, units=["month", "quarter", "year", "decade"])
    rows = {r[0].decode(): [c.decode() for c in r] for r in h.rows}
    assert rows["2019-12-31"][1:] == ["2019-12", "2019-Q4", "2019", "2010-2019", "*"]
    assert rows["1987-06-15"][1:] == ["1987-06", "1987-Q2", "1987", "1980-1989", "*"]
    german = date_hierarchy("d", ["31.12.2019"])  # format detected
    assert german.rows[0][1] == b"2019-12"
    with pytest.raises(InputError, match="fine to coarse"):
        date_hierarchy("d", values, units=["year", "month"])


def test_built_date_and_zip_hierarchies_anonymize_a_table(tmp_path, capsys):
    rows = [[f"{1950 + i % 40}-{1 + i % 12:02d}-{1 + i % 28:02d}", f"8{i % 7}{i % 5}{i % 3}{i % 10}", str(i % 2)]
            for i in range(400)]
    data = tmp_path / "t.csv"
    data.write_text("born;zip;flag\n" + "".join(";".join(r) + "\n" for r in rows))
    born, zipc = tmp_path / "born.csv", tmp_path / "zip.csv"
    assert cli(["hierarchy", "date", "--from", data, "--column", "born", "--output", born], capsys)[0] == 0
    assert cli(["hierarchy", "auto", "--from", data, "--column", "zip", "--output", zipc], capsys)[0] == 0
    assert read_rows(zipc)[0][1].endswith("*")  # auto picked masking for five-digit codes
    for path, name in ((born, "born"), (zipc, "zip")):
        assert_monotone_and_covering(read_rows(path), set(column(data, name)))
    engine_round_trip(data, {"born": born, "zip": zipc}, k=5)


def test_values_option_and_stdout(capsys):
    assert main(["hierarchy", "interval", "--values", "0..9", "--width", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "0;[0, 5[;*" and out[9] == "9;[5, 10[;*"


@pytest.mark.parametrize("args, message", [
    (["hierarchy", "interval", "--from", "missing.csv", "--column", "age"], "missing.csv: file not found"),
    (["hierarchy", "interval", "--from", str(ADULT), "--column", "nope"], "unknown column 'nope'"),
    (["hierarchy", "interval", "--from", str(ADULT), "--column", "sex"], "value 'Male' is not a number"),
    (["hierarchy", "date", "--values", "a,b"], "cannot detect the date format"),
    (["hierarchy", "mask"], "either with --from"),
])
def test_bad_input_is_one_line_exit_2(args, message, capsys):
    code, err = cli(args, capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
