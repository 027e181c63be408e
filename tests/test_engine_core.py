"""Engine core on the dissertation's 8-row example (docs/design.md, running example) and bad input."""

from __future__ import annotations


import numpy as np
import pytest

from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, NoSolutionError, anonymize, read_table_csv
from fedanon.engine.search.lattice import Lattice
from fedanon.data.table import EncodedTable as _T
from fedanon.errors import FedanonError, HierarchyError, InputError

from datasets import EXAMPLE_DIR as EXAMPLE
QIS = ["age", "sex", "zipcode"]


def example():
    header, rows = read_table_csv(EXAMPLE / "example.csv")
    table = EncodedTable.from_rows(header, rows)
    hier = {a: Hierarchy.read_csv(EXAMPLE / f"example_hierarchy_{a}.csv", a) for a in QIS + ["diagnosis"]}
    return table, hier


# ---------------------------------------------------------------------------- lattice facts
def test_example_lattice_size_and_levels():
    _, hier = example()
    lat = Lattice([hier[a].height for a in QIS])
    assert [hier[a].height - 1 for a in QIS] == [2, 1, 5]
    assert lat.size == 36
    assert lat.n_levels == 9


def test_example_node_neighbourhood():
    _, hier = example()
    lat = Lattice([hier[a].height for a in QIS])
    node = lat.node_id((1, 0, 3))
    succ = {lat.node_levels(n) for n in lat.successors(node)}
    pred = {lat.node_levels(n) for n in lat.predecessors(node)}
    assert succ == {(2, 0, 3), (1, 1, 3), (1, 0, 4)}
    assert pred == {(0, 0, 3), (1, 0, 2)}
    assert int(lat.specializations_mask(node).sum()) - 1 == 7
    assert int(lat.generalizations_mask(node).sum()) - 1 == 11


def test_stable_order_lower_total_then_lexicographic():
    lat = Lattice([3, 2, 6])
    ordered = [lat.node_levels(n) for n in lat.order]
    assert ordered[0] == (0, 0, 0) and ordered[-1] == (2, 1, 5)
    keys = [(sum(v), v) for v in ordered]
    assert keys == sorted(keys)


@pytest.mark.parametrize("heights", [[1], [4], [3, 1, 2], [5, 4, 3, 3, 2, 2, 3, 2, 3], [2] * 12])
def test_lattice_levels_total_and_order_follow_the_node_ids(heights):
    """Node id = C-order position in the grid of `heights` (itertools.product enumerates that
    order); `levels`, `total` and `order` are built by broadcasting and a radix sort, so they
    are checked against that plain enumeration and a comparison sort."""
    import itertools

    lat = Lattice(heights)
    expected = list(itertools.product(*[range(h) for h in heights]))
    assert lat.levels.dtype == np.int16 and lat.levels.flags.c_contiguous
    assert [tuple(r) for r in lat.levels.tolist()] == expected
    assert lat.total.tolist() == [sum(v) for v in expected]
    assert lat.order.tolist() == sorted(range(len(expected)), key=lambda n: (sum(expected[n]), expected[n]))
    assert all(lat.node_id(v) == n for n, v in enumerate(expected[:50]))


def test_a_lattice_too_large_to_materialize_refuses_its_per_node_arrays():
    lat = Lattice([5] * 12)  # 244 M nodes: the heuristic search's domain
    for name in ("levels", "total", "order"):
        with pytest.raises(InputError, match="too large for the exact search"):
            getattr(lat, name)


# ---------------------------------------------------------------------------- optimum facts
def test_example_2_anonymity_nue_optimum():
    table, hier = example()
    res = anonymize(table, hier, AnonymizationConfig(QIS, k=2))
    assert res.transformation == {"age": 1, "sex": 0, "zipcode": 3}
    assert res.suppressed_rows == 0
    assert res.checks >= 1 and res.lattice_size == 36
    # every output class has >= 2 rows and the sensitive column passes through unchanged
    out = res.output.decode_rows()
    keys = [tuple(r[:3]) for r in out]
    assert min(keys.count(k) for k in keys) >= 2
    assert [r[3] for r in out] == [r[3] for r in table.decode_rows()]
    assert set(r[0] for r in out) <= {b"1-19", b"20-60", b"61-99"}


def test_example_output_row_order_and_suppression_marker():
    table, hier = example()
    res = anonymize(table, hier, AnonymizationConfig(QIS, k=3, suppression=0.25, metric="height"))
    out = res.output.decode_rows()
    assert len(out) == 8
    sup = np.flatnonzero(res.suppressed)
    assert res.suppressed_rows == len(sup) <= 2
    for r in sup:
        assert out[r][:3] == [b"*", b"*", b"*"]
    kept = [tuple(out[r][:3]) for r in range(8) if not res.suppressed[r]]
    assert all(kept.count(k) >= 3 for k in kept)
    report = res.to_report()
    for key in ("transformation", "suppressed_rows", "information_loss", "metric", "classes", "checks", "rollups", "elapsed_s"):
        assert key in report


def test_no_solution_error():
    header = ["a"]
    table = EncodedTable.from_rows(header, [["x"], ["y"], ["z"]])
    h = Hierarchy.from_rows("a", [["x", "x"], ["y", "y"], ["z", "z"]])  # top level does not merge
    with pytest.raises(NoSolutionError) as info:
        anonymize(table, {"a": h}, AnonymizationConfig(["a"], k=2))
    assert isinstance(info.value, FedanonError)
    assert "no transformation" in str(info.value)


def test_suppression_can_beat_generalization():
    table = EncodedTable.from_rows(["a"], [["1"], ["1"], ["2"], ["2"], ["3"]])
    h = Hierarchy.from_rows("a", [["1", "*"], ["2", "*"], ["3", "*"]])
    cfg = AnonymizationConfig(["a"], k=2, suppression=0.2, metric="precision")
    res = anonymize(table, {"a": h}, cfg)
    assert res.transformation == {"a": 0}
    assert res.suppressed_rows == 1 and res.classes == 2
    assert anonymize(table, {"a": h}, AnonymizationConfig(["a"], k=2)).transformation == {"a": 1}


# ---------------------------------------------------------------------------- bad input
def test_value_missing_from_hierarchy(tmp_path):
    table, hier = example()
    path = tmp_path / "age.csv"
    path.write_text("".join(";".join(v.decode() for v in r) + "\n" for r in hier["age"].rows if r[0] != b"45"))
    h = Hierarchy.read_csv(path, "age")
    with pytest.raises(HierarchyError) as info:
        anonymize(table, {**hier, "age": h}, AnonymizationConfig(QIS, k=2))
    msg = str(info.value)
    assert "'45'" in msg and "age" in msg and str(path) in msg and "line 3" in msg


def test_non_monotone_hierarchy(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("a;x;*\nb;x;*\nc;x;top\n")
    with pytest.raises(HierarchyError) as info:
        Hierarchy.read_csv(path, "v")
    msg = str(info.value)
    assert str(path) in msg and "line 3" in msg and "'x'" in msg and "not monotone" in msg


def test_ragged_hierarchy(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("a;x;*\n\nb;x\n")
    with pytest.raises(HierarchyError) as info:
        Hierarchy.read_csv(path, "v")
    msg = str(info.value)
    assert str(path) in msg and "line 3" in msg and "'b'" in msg and "ragged" in msg


def test_duplicate_and_empty_hierarchy(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("a;*\na;*\n")
    with pytest.raises(HierarchyError, match="line 2.*'a'"):
        Hierarchy.read_csv(path, "v")
    empty = tmp_path / "e.csv"
    empty.write_text("\n")
    with pytest.raises(HierarchyError, match="empty"):
        Hierarchy.read_csv(empty, "v")


def test_unknown_column():
    table, hier = example()
    with pytest.raises(InputError, match="'agee'.*age, sex, zipcode, diagnosis"):
        anonymize(table, hier, AnonymizationConfig(["agee", "sex"], k=2))


@pytest.mark.parametrize("k", [0, -3])
def test_bad_k(k):
    table, hier = example()
    with pytest.raises(InputError, match=f"k must be an integer >= 1, got {k}"):
        anonymize(table, hier, AnonymizationConfig(QIS, k=k))


@pytest.mark.parametrize("s", [-0.1, 1.0, 1.5])
def test_bad_suppression(s):
    table, hier = example()
    with pytest.raises(InputError, match=r"suppression must be a fraction in \[0, 1\), got " + str(s)):
        anonymize(table, hier, AnonymizationConfig(QIS, k=2, suppression=s))


def test_bad_metric_and_config_roundtrip():
    with pytest.raises(InputError, match="unknown metric 'foo'"):
        AnonymizationConfig(["a"], metric="foo").validate()
    cfg = AnonymizationConfig(["a", "b"], k=3, suppression=0.1, metric="loss")
    assert AnonymizationConfig.from_dict(cfg.to_dict()) == cfg


def test_empty_and_ragged_table_file(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match=f"{empty}: file is empty"):
        read_table_csv(empty)
    header_only = tmp_path / "h.csv"
    header_only.write_text("a;b\n")
    with pytest.raises(InputError, match="no data rows"):
        read_table_csv(header_only)
    ragged = tmp_path / "r.csv"
    ragged.write_text("a;b\n1;2\n1;2;3\n")
    with pytest.raises(InputError, match=f"{ragged}, line 3: 3 values, expected 2"):
        read_table_csv(ragged)


def test_table_api():
    t = _T.from_rows(["a", "b"], [["x", b"\x00\xff"], ["y", b"\x00\xff"], ["x", "z"]])
    assert t.n_rows == 3 and t.codes.dtype == np.int32
    assert t.decode_rows() == [[b"x", b"\x00\xff"], [b"y", b"\x00\xff"], [b"x", b"z"]]
    assert t.select(["b"]).decode_rows() == [[b"\x00\xff"], [b"\x00\xff"], [b"z"]]
    with pytest.raises(InputError, match="unknown column 'c'"):
        t.column_index("c")
    mixed = _T.from_rows(["a"], [["x"], [b"x"], ["y"]])  # str and bytes spell the same value
    assert mixed.dictionaries == [[b"x", b"y"]] and mixed.codes[:, 0].tolist() == [0, 0, 1]
    with pytest.raises(InputError, match="row 2 has 1 values, expected 2"):
        _T.from_rows(["a", "b"], [["x", "y"], ["x"]])


def test_hierarchy_merge_and_roundtrip(tmp_path):
    a = Hierarchy.from_rows("v", [["1", "low", "*"], ["2", "low", "*"]])
    b = Hierarchy.from_rows("v", [["2", "low", "*"], ["9", "high", "*"]])
    m = a.merge(b)
    assert [r[0] for r in m.rows] == [b"1", b"2", b"9"]
    with pytest.raises(HierarchyError, match="conflicting"):
        a.merge(Hierarchy.from_rows("v", [["2", "high", "*"]]))
    path = tmp_path / "m.csv"
    m.write_csv(path)
    assert Hierarchy.read_csv(path, "v") == m
    codes, dicts = m.code_map([b"9", b"1"])
    assert codes.tolist() == [[0, 1], [0, 1], [0, 0]]
    assert dicts == [[b"9", b"1"], [b"high", b"low"], [b"*"]]
