"""Class means in Protocol C: the helper sums encrypted values per class, the key holder
decrypts class sums only.

Real daemons (`fedanon simulate --protocol C`: gRPC over mutual TLS) release on a sample of
ADULT what `fedanon anonymize` releases -- `age` and a derived column with negative values
and decimals (`age_offset` = (age - 40) / 8) both as class means. In memory, with every
payload recorded: no party but the owner ever receives a planted value, neither as text nor
as its fixed-point integer, and the key holder's result holds only the class mean.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from fedanon.cli import main
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.io.delimited import read_table_csv
from fedanon.model.config import AnonymizationConfig
from fedanon.protocols.c.class_means import FIXED_DECIMALS, OFFSET
from fedanon.protocols.kit.api import RunSettings
from fedanon.protocols.sim.local_run import run_in_memory
from fedanon.protocols.sim.split import split_horizontal

from datasets import ADULT_DIR
from test_leakage import views

SAMPLE_ROWS = 240


def adult_sample(path: Path) -> Path:
    lines = (ADULT_DIR / "adult.csv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split(";")
    at = header.index("age")
    out = [";".join(header + ["age_offset"])]
    for line in lines[1:SAMPLE_ROWS + 1]:
        age = int(line.split(";")[at])
        out.append(f"{line};{Decimal(age - 40) / 8}")
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def test_daemons_release_the_class_means_anonymize_releases(tmp_path):
    table = adult_sample(tmp_path / "adult_sample.csv")
    flags = [str(table), "--qi", f"sex={ADULT_DIR / 'adult_hierarchy_sex.csv'}",
             "--qi", f"race={ADULT_DIR / 'adult_hierarchy_race.csv'}",
             "--qi", f"education={ADULT_DIR / 'adult_hierarchy_education.csv'}",
             "--k", "5", "--suppression", "0.05", "--aggregate", "age=mean", "--aggregate", "age_offset=mean",
             "--insensitive", "salary-class"]
    sim, ref = tmp_path / "sim.csv", tmp_path / "ref.csv"
    report = tmp_path / "sim.json"
    assert main(["simulate", "--protocol", "C", "--parties", "2", *flags, "-o", str(sim), "--report", str(report),
                 "-q"]) == 0
    assert main(["anonymize", *flags, "-o", str(ref), "--verify", "-q"]) == 0
    got, want = sim.read_text().splitlines(), ref.read_text().splitlines()
    assert got[0] == want[0] == "sex;age;race;education;salary-class;age_offset"
    assert sorted(got[1:]) == sorted(want[1:])
    assert any(line.split(";")[5].startswith("-") for line in want[1:])  # negative means travelled too
    assert "Protocol C" in report.read_text()


def test_no_party_but_the_owner_receives_a_value_of_a_class_mean_column():
    columns, rows = read_table_csv(ADULT_DIR / "adult.csv")
    columns = [c.decode() if isinstance(c, bytes) else c for c in columns]
    rows = [[v.decode() if isinstance(v, bytes) else v for v in r] for r in rows[:90]]
    qis = ["sex", "race"]
    keep = qis + ["age"]
    rows = [[r[columns.index(c)] for c in keep] for r in rows]
    canary = "8765.4321"
    shares = split_horizontal(keep, rows, 3)
    hierarchies = {q: Hierarchy.read_csv(ADULT_DIR / f"adult_hierarchy_{q}.csv", q) for q in qis}
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(shares)}
    owner = "p2"
    local[owner].rows[0][local[owner].columns.index("age")] = canary
    config = AnonymizationConfig(qis, k=3, suppression=0.1)
    parties = {"p1": "primary", "p2": "primary", "p3": "primary", "helper": "helper"}
    settings = RunSettings("mean-leak", "C", "horizontal", config, parties, "p1",
                           {"aggregate_means": ["age"], "counters": "paillier"})
    run = run_in_memory(settings, local, record=True, timeout_s=300)
    assert not run.errors, run.errors
    fixed = str(int(Decimal(canary) * 10 ** FIXED_DECIMALS) + OFFSET).encode()
    for party, transport in run.transports.items():
        if party == owner:
            continue
        for sender, topic, payload in transport.recorded:
            for view in views(payload):
                assert canary.encode() not in view and fixed not in view, (party, sender, topic)
    out = run.outcomes["p1"]
    assert out.output_columns == keep
    ages = {r[2] for r in out.output_rows}
    assert canary not in ages and ages - {"*"}
    # the canary's class mean is the mean of its class, computed here from the planted rows
    owner_row = local[owner].rows[0]
    pooled = [r for p in local.values() for r in p.rows]
    level = run.outcomes["p1"].report["transformation"]
    gen = {q: {v.decode(): row[level[q]].decode() for row in hierarchies[q].rows for v in [row[0]]} for q in qis}
    key = tuple(gen[q][owner_row[i]] for i, q in enumerate(qis))
    members = [Decimal(r[2]) for r in pooled if tuple(gen[q][r[i]] for i, q in enumerate(qis)) == key]
    released = {r[2] for r in out.output_rows if tuple(r[:2]) == key}
    mean = (sum(members) / len(members)).quantize(Decimal("0.01"))  # half to even, the context's default
    assert released == {format(mean.normalize(), "f")}


@pytest.mark.parametrize("options, needle", [
    ({"aggregate_means": ["age"], "counters": "elgamal"}, "counters 'paillier'"),
    ({"aggregate_means": ["sex"]}, "quasi-identifiers or sensitive"),
    ({"aggregate_means": "age"}, "must be a list of column names"),
])
def test_unsupported_class_mean_settings_stop_the_run(options, needle):
    columns, rows = read_table_csv(ADULT_DIR / "adult.csv")
    columns = [c.decode() if isinstance(c, bytes) else c for c in columns]
    keep = ["sex", "race", "age"]
    rows = [[(r[columns.index(c)].decode() if isinstance(r[columns.index(c)], bytes) else r[columns.index(c)])
             for c in keep] for r in rows[:30]]
    hierarchies = {q: Hierarchy.read_csv(ADULT_DIR / f"adult_hierarchy_{q}.csv", q) for q in ("sex", "race")}
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(split_horizontal(keep, rows, 2))}
    settings = RunSettings("mean-bad", "C", "horizontal", AnonymizationConfig(["sex", "race"], k=2),
                           {"p1": "primary", "p2": "primary", "helper": "helper"}, "p1", options)
    run = run_in_memory(settings, local, timeout_s=120)
    assert run.errors and any(needle in str(e) for e in run.errors.values()), run.errors


def test_a_value_the_encoding_cannot_carry_fails_simulate_in_one_line(tmp_path, capsys):
    from cli_checks import one_line_error

    table = tmp_path / "t.csv"
    table.write_text("g;x\na;1.5\na;2.25\nb;1.23456\nb;4\n", encoding="utf-8")
    hierarchy = tmp_path / "g.csv"
    hierarchy.write_text("a;*\nb;*\n", encoding="utf-8")
    line = one_line_error(capsys, "simulate", "--protocol", "C", "--parties", "2", table, "--qi", f"g={hierarchy}",
                          "--k", "2", "--aggregate", "x=mean", "-o", tmp_path / "o.csv", "-q")
    assert f"{table}, line 4: column 'x' holds '1.23456'" in line and "at most 4 decimals" in line
