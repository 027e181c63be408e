"""The independent verifier must accept correct outputs and catch doctored ones.

Outputs here are produced by hand (plain dict lookups in the hierarchy rows),
not by the engine, so the verifier is tested on its own before it is trusted
to re-check every engine and CLI output elsewhere.
"""

from __future__ import annotations


import pytest

from fedanon.model.config import AnonymizationConfig
from fedanon.model.privacy.presence import DeltaPresence
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.data.io.delimited import read_table_csv
from fedanon.data.hierarchy import Hierarchy
from fedanon.oracle.verify import verify_anonymized

from datasets import EXAMPLE_DIR as EXAMPLE
QIS = ["age", "sex", "zipcode"]


@pytest.fixture(scope="module")
def example():
    header, rows = read_table_csv(EXAMPLE / "example.csv")
    hier = {a: Hierarchy.read_csv(EXAMPLE / f"example_hierarchy_{a}.csv", a) for a in QIS + ["diagnosis"]}
    return header, rows, hier


def generalize(header, rows, hier, levels, suppress=()):
    gen = {a: {r[0].decode(): r[levels[a]].decode() for r in hier[a].rows} for a in levels}
    out = []
    for i, row in enumerate(rows):
        new = list(row)
        for a in levels:
            c = header.index(a)
            new[c] = "*" if i in suppress else gen[a][row[c]]
        out.append(new)
    return out


def test_accepts_the_2_anonymous_optimum_103(example):
    header, rows, hier = example
    levels = {"age": 1, "sex": 0, "zipcode": 3}
    out = generalize(header, rows, hier, levels)
    cfg = AnonymizationConfig(QIS, k=2)
    assert verify_anonymized(header, rows, header, out, cfg, hier) == []
    assert verify_anonymized(header, rows, header, out, cfg, hier, transformation=levels) == []


def test_catches_k_violation_and_wrong_level(example):
    header, rows, hier = example
    levels = {"age": 1, "sex": 0, "zipcode": 2}  # 3-digit zip prefixes split the classes
    out = generalize(header, rows, hier, levels)
    problems = verify_anonymized(header, rows, header, out, AnonymizationConfig(QIS, k=2), hier)
    assert any("< k=2" in p for p in problems)
    good = generalize(header, rows, hier, {"age": 1, "sex": 0, "zipcode": 3})
    problems = verify_anonymized(header, rows, header, good, AnonymizationConfig(QIS, k=2), hier,
                                 transformation={"age": 1, "sex": 0, "zipcode": 4})
    assert any("reported level" in p for p in problems)


def test_catches_a_doctored_cell(example):
    header, rows, hier = example
    out = generalize(header, rows, hier, {"age": 1, "sex": 0, "zipcode": 3})
    out[0][0] = "61-99"          # wrong generalization of age 34
    problems = verify_anonymized(header, rows, header, out, AnonymizationConfig(QIS, k=2), hier)
    assert problems and "age" in problems[0]
    out = generalize(header, rows, hier, {"age": 1, "sex": 0, "zipcode": 3})
    out[2][3] = "pneumonia"      # sensitive value changed
    problems = verify_anonymized(header, rows, header, out, AnonymizationConfig(QIS, k=2), hier)
    assert any("non-QI column 'diagnosis'" in p for p in problems)


def test_suppression_limit_and_flags(example):
    header, rows, hier = example
    levels = {"age": 1, "sex": 0, "zipcode": 2}
    # at (1,0,2) classes: 20-60/male/826 {34}, 20-60/female/817 {45}, 61-99/male/819 {66,70},
    # 20-60/female/819 {35}, 20-60/male/824 {21}, 1-19/female/829 {18}, 1-19/female/820 {19}
    singles = [0, 1, 4, 5, 6, 7]
    out = generalize(header, rows, hier, levels, suppress=singles)
    cfg_ok = AnonymizationConfig(QIS, k=2, suppression=0.75)
    flags = [i in singles for i in range(8)]
    assert verify_anonymized(header, rows, header, out, cfg_ok, hier, suppressed=flags,
                             reported_suppressed_rows=6) == []
    cfg_low = AnonymizationConfig(QIS, k=2, suppression=0.5)
    assert any("limit is 4" in p for p in verify_anonymized(header, rows, header, out, cfg_low, hier))
    wrong = verify_anonymized(header, rows, header, out, cfg_ok, hier, reported_suppressed_rows=5)
    assert any("report says 5" in p for p in wrong)


def test_l_diversity_and_t_closeness_on_node_114(example):
    header, rows, hier = example
    out = generalize(header, rows, hier, {"age": 1, "sex": 1, "zipcode": 4})
    for cfg in (
        AnonymizationConfig(QIS, l_diversity=LDiversity("distinct", 2, "diagnosis")),
        AnonymizationConfig(QIS, l_diversity=LDiversity("recursive", 2, "diagnosis", 4)),
        AnonymizationConfig(QIS, t_closeness=TCloseness(0.2, "equal", "diagnosis")),
        AnonymizationConfig(QIS, t_closeness=TCloseness(0.2, "hierarchical", "diagnosis")),
    ):
        assert verify_anonymized(header, rows, header, out, cfg, hier) == [], cfg
    for cfg in (
        AnonymizationConfig(QIS, l_diversity=LDiversity("recursive", 2, "diagnosis", 2)),   # 3 < 2*1 fails
        AnonymizationConfig(QIS, l_diversity=LDiversity("entropy", 2, "diagnosis")),        # 3:1 class
        AnonymizationConfig(QIS, t_closeness=TCloseness(0.1, "hierarchical", "diagnosis")),
        AnonymizationConfig(QIS, t_closeness=TCloseness(0.1, "equal", "diagnosis")),
    ):
        assert verify_anonymized(header, rows, header, out, cfg, hier), cfg


def test_delta_presence_with_male_subset(example):
    header, rows, hier = example
    subset = [r[1] == "male" for r in rows]
    out = generalize(header, rows, hier, {"age": 2, "sex": 1, "zipcode": 3})
    ok = AnonymizationConfig(QIS, delta_presence=DeltaPresence(0.0, 0.5))
    assert verify_anonymized(header, rows, header, out, ok, hier, research_subset=subset) == []
    bad = AnonymizationConfig(QIS, delta_presence=DeltaPresence(0.0, 0.4))
    problems = verify_anonymized(header, rows, header, out, bad, hier, research_subset=subset)
    assert len(problems) == 2 and all("delta 0.5" in p for p in problems)
    missing = verify_anonymized(header, rows, header, out, ok, hier)
    assert any("no research subset" in p for p in missing)


def test_verify_result_catches_a_doctored_engine_result(example):
    """verify_result reads only rows + reported facts, so tampering with them is caught."""
    import numpy as np

    from fedanon.engine import EncodedTable, anonymize

    header, rows, hier = example
    table = EncodedTable.from_rows(header, rows)
    cfg = AnonymizationConfig(QIS, k=2)
    res = anonymize(table, hier, cfg)
    from fedanon.oracle.verify import verify_result

    assert verify_result(table, hier, cfg, res) == []
    # doctor the output: un-generalize one zipcode cell
    codes = res.output.codes.copy()
    zc = header.index("zipcode")
    res.output.dictionaries[zc].append(b"82667")
    codes[0, zc] = len(res.output.dictionaries[zc]) - 1
    res.output.codes = codes
    assert verify_result(table, hier, cfg, res)
    # doctor the report instead: claim a suppressed row that is not there
    res2 = anonymize(table, hier, cfg)
    res2.suppressed_rows = 1
    assert any("report says 1" in p for p in verify_result(table, hier, cfg, res2))
    res2.suppressed_rows = 0
    res2.classes = 5  # the optimum (1,0,3) has 4 classes
    assert any("report says 5 classes" in p for p in verify_result(table, hier, cfg, res2))
    res3 = anonymize(table, hier, AnonymizationConfig(QIS, k=2))
    assert verify_result(table, hier, AnonymizationConfig(QIS, k=3), res3)  # stricter model than used
    assert np.asarray(res3.suppressed).sum() == 0
