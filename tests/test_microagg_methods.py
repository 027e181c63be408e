"""Hand-checked microaggregation cases for every method, and property tests against
the plain-Python references in tests/microagg_reference.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fedanon
from fedanon.microagg import microaggregate, microaggregate_array
from fedanon.microagg.quality import linkage_risk, sse_sst
from tests import microagg_reference as ref


def partition(labels: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(np.flatnonzero(labels == g).tolist()) for g in np.unique(labels)}


def column(values: list[float]) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)[:, None]


# --------------------------------------------------------------------------- MDAV
def test_mdav_hand_case_last_group_takes_the_rest() -> None:
    # x = 0 1 2 5 9 10 11, k = 3: n = 7 < 3k, >= 2k. Centroid 38/7 = 5.43; the farthest
    # record is 11 (5.57 away, 0 is 5.43 away): group {11, 10, 9}; the rest {0, 1, 2, 5}
    # (4 records, k..2k-1) is the last group. Means 10 and 2.
    # SSE = (1 + 0 + 1) + (4 + 1 + 0 + 9) = 16; SST = 332 - 38^2/7 = 125.714...; SSE/SST = 0.127273
    x = [0, 1, 2, 5, 9, 10, 11]
    result = microaggregate_array(column(x), 3, "mdav")
    assert partition(result.groupings[0]) == {frozenset({4, 5, 6}), frozenset({0, 1, 2, 3})}
    assert result.released[:, 0].tolist() == [2, 2, 2, 2, 10, 10, 10]
    assert result.quality["information_loss"]["sse_sst"] == pytest.approx(16 / (332 - 38 ** 2 / 7), rel=1e-12)


def test_mdav_hand_case_two_groups_per_round() -> None:
    # x = 1 2 3 10 11 12 20 21 22, k = 3: n = 3k, one round. Centroid 102/9 = 11.33; farthest 22
    # -> {20, 21, 22}; farthest from 22 among the rest: 1 -> {1, 2, 3}; rest {10, 11, 12}.
    # SSE = 3 * 2 = 6; SST = 1704 - 102^2/9 = 548; SSE/SST = 0.010949
    x = [1, 2, 3, 10, 11, 12, 20, 21, 22]
    result = microaggregate_array(column(x), 3, "mdav")
    assert partition(result.groupings[0]) == {frozenset({0, 1, 2}), frozenset({3, 4, 5}), frozenset({6, 7, 8})}
    assert result.released[:, 0].tolist() == [2, 2, 2, 11, 11, 11, 21, 21, 21]
    assert result.quality["information_loss"]["sse_sst"] == pytest.approx(6 / 548, rel=1e-12)


def test_mdav_median() -> None:
    # same grouping as the first hand case; medians: {0, 1, 2, 5} -> (1 + 2) / 2 = 1.5, {9, 10, 11} -> 10
    result = microaggregate_array(column([0, 1, 2, 5, 9, 10, 11]), 3, "mdav", "median")
    assert result.released[:, 0].tolist() == [1.5, 1.5, 1.5, 1.5, 10, 10, 10]


def test_mdav_standardizes_attributes() -> None:
    # on z-scores the grouping cannot depend on units: b in grams instead of kilograms, or a
    # shifted, gives the same groups (on raw values b's spread would decide alone)
    rng = np.random.default_rng(3)
    values = rng.standard_normal((40, 2))
    base = partition(microaggregate_array(values, 3, "mdav", quality=False).groupings[0])
    scaled = values * np.array([1.0, 1000.0]) + np.array([50.0, 0.0])
    assert partition(microaggregate_array(scaled, 3, "mdav", quality=False).groupings[0]) == base


# --------------------------------------------------------------------------- univariate
def test_single_axis_largest_group_holds_the_median() -> None:
    # x = 5 1 4 2 3 9 8 (k = 3), sorted 1 2 3 4 5 8 9: groups of 3 from both ends, the one
    # record left over joins the group holding the median (4): {1, 2, 3, 4} and {5, 8, 9}.
    # Means 2.5 and 22/3.
    x = [5, 1, 4, 2, 3, 9, 8]
    result = microaggregate_array(column(x), 3, "univariate", sort_by="x0")
    assert partition(result.groupings[0]) == {frozenset({1, 2, 3, 4}), frozenset({0, 5, 6})}
    assert result.released[:, 0].tolist() == pytest.approx([22 / 3, 2.5, 2.5, 2.5, 2.5, 22 / 3, 22 / 3])


def test_single_axis_middle_group_with_three_groups() -> None:
    # n = 11, k = 3: 3 groups, sizes 3 / 5 / 3; the middle group holds positions 3..7 (median at 5)
    result = microaggregate_array(column(list(range(11))), 3, "univariate", sort_by="x0")
    assert sorted(np.bincount(result.groupings[0]).tolist()) == [3, 3, 5]
    assert result.released[:, 0].tolist() == [1, 1, 1, 5, 5, 5, 5, 5, 9, 9, 9]


def test_single_axis_sorts_every_attribute_by_one_key() -> None:
    # sorted by a: groups {0, 1, 2} and {3, 4, 5}; b follows those groups (means 20 and 50)
    a = [1, 2, 3, 4, 5, 6]
    b = [30, 10, 20, 60, 40, 50]
    result = microaggregate_array(np.column_stack([a, b]).astype(float), 3, "univariate", names=["a", "b"], sort_by="a")
    assert result.column("b").tolist() == [20, 20, 20, 50, 50, 50]
    assert result.column("a").tolist() == [2, 2, 2, 5, 5, 5]


def test_individual_sorting_groups_each_attribute_on_its_own() -> None:
    # a ascending, b descending: a's groups {0,1,2},{3,4,5} (means 2, 5); b's groups are
    # also {0,1,2} (60,50,40 -> 50) and {3,4,5} (30,20,10 -> 20), found on b's own order.
    # With b = 10 60 20 50 30 40 instead, b's groups are {0,2,4} (mean 20) and {1,3,5} (50).
    a = [1, 2, 3, 4, 5, 6]
    b = [10, 60, 20, 50, 30, 40]
    result = microaggregate_array(np.column_stack([a, b]).astype(float), 3, "individual", names=["a", "b"])
    assert result.column("a").tolist() == [2, 2, 2, 5, 5, 5]
    assert result.column("b").tolist() == [20, 50, 20, 50, 20, 50]
    assert len(result.groupings) == 2


# --------------------------------------------------------------------------- k-Ward
def test_kward_hand_case() -> None:
    # x = 0 1 2 10 11 20 21 22, k = 3. Step 1: the extremes 0 and 22 seed {0, 1, 2} and {20, 21, 22}.
    # Step 2: d(10, 11) = 1*1/2 * 1 = 0.5 is the smallest -> {10, 11} (mean 10.5, 2 < k records).
    # {10, 11} to {0, 1, 2}: 2*3/5 * 9.5^2 = 108.3; to {20, 21, 22}: 2*3/5 * 10.5^2 = 132.3 -> joins the first.
    # Groups {0, 1, 2, 10, 11} (mean 4.8) and {20, 21, 22} (mean 21).
    # SSE = 4.8^2 + 3.8^2 + 2.8^2 + 5.2^2 + 6.2^2 + 2 = 112.8; SST = 1551 - 87^2/8 = 604.875
    x = [0, 1, 2, 10, 11, 20, 21, 22]
    result = microaggregate_array(column(x), 3, "kward")
    assert partition(result.groupings[0]) == {frozenset({0, 1, 2, 3, 4}), frozenset({5, 6, 7})}
    assert result.released[:, 0].tolist() == pytest.approx([4.8] * 5 + [21] * 3)
    assert result.quality["information_loss"]["sse_sst"] == pytest.approx(112.8 / 604.875, rel=1e-12)


def test_kward_splits_groups_of_2k_or_more() -> None:
    # 0..9 evenly spaced with k = 2: Ward alone may build big groups; step 3 splits them, so
    # every final group has 2 or 3 records.
    result = microaggregate_array(column([float(v) for v in range(10)]), 2, "kward")
    sizes = np.bincount(result.groupings[0])
    assert sizes.min() >= 2 and sizes.max() <= 3


def test_kward_step_three_splits_a_group_of_2k() -> None:
    # x = 1 2 4 5 16 20 22 23 24 26, k = 2. Step 1: the extremes 1 and 26 seed {1, 2} and {26, 24}.
    # Step 2 (Ward, d = ni nj / (ni + nj) * diff^2): {4, 5} (0.5), {22, 23} (0.5); then 20 joins
    # {22, 23} (2/3 * 2.5^2 = 4.17 < 20-16's 8); then 16 joins {20, 22, 23} (3/4 * 5.67^2 = 24.1,
    # against 54 to {24, 26} and 88 to {4, 5}): a group of 4 = 2k.
    # Step 3 on {16, 20, 22, 23}: the extremes 16 and 23 seed {16, 20} and {23, 22}.
    x = [1, 2, 4, 5, 16, 20, 22, 23, 24, 26]
    result = microaggregate_array(column(x), 2, "kward")
    assert partition(result.groupings[0]) == {frozenset({0, 1}), frozenset({2, 3}), frozenset({4, 5}),
                                              frozenset({6, 7}), frozenset({8, 9})}
    assert result.released[:, 0].tolist() == [1.5, 1.5, 4.5, 4.5, 18, 18, 22.5, 22.5, 25, 25]


# --------------------------------------------------------------------------- quality
def test_linkage_risk_hand_case() -> None:
    # groups {0, 1} -> 0.5 and {2, 3} -> 10.5 (1-D): every record's nearest released value is
    # its own group's, which two released records share: each record counts 1/2 -> risk 0.5.
    original = column([0, 1, 10, 11])
    released = column([0.5, 0.5, 10.5, 10.5])
    assert linkage_risk(original, released) == pytest.approx(0.5)
    # an unprotected release links everyone
    assert linkage_risk(original, original.copy()) == pytest.approx(1.0)


def test_sse_sst_hand_case() -> None:
    # a: 0 2 -> released 1 1 (sd 1): SSE 2, SST 2; b: unchanged: SSE 0, SST 2 -> 2/4 = 0.5
    original = np.array([[0.0, 5.0], [2.0, 7.0]])
    released = np.array([[1.0, 5.0], [1.0, 7.0]])
    loss = sse_sst(original, released)
    assert loss["sse_sst"] == pytest.approx(0.5)
    assert loss["sse_sst_per_attribute"] == pytest.approx([1.0, 0.0])


# --------------------------------------------------------------------------- properties
matrices = st.integers(min_value=1, max_value=3).flatmap(
    lambda d: st.lists(st.lists(st.integers(-50, 50), min_size=d, max_size=d), min_size=1, max_size=40))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=matrices, k=st.integers(1, 6), method=st.sampled_from(["mdav", "univariate", "individual", "kward"]),
       how=st.sampled_from(["mean", "median"]))
def test_groups_sizes_rows_and_quality_against_references(rows: list[list[int]], k: int, method: str, how: str) -> None:
    values = np.asarray(rows, dtype=np.float64)
    if k > values.shape[0]:
        with pytest.raises(ValueError):
            microaggregate_array(values, k, method, how)
        return
    result = microaggregate_array(values, k, method, how)
    assert result.released.shape == values.shape
    for j, labels in enumerate(result.groupings):
        assert labels.shape == (values.shape[0],)
        sizes = np.bincount(labels)
        sizes = sizes[sizes > 0]
        assert sizes.min() >= k
        assert sizes.max() <= 2 * k - 1  # every method here promises at most 2k - 1
        columns = range(values.shape[1]) if len(result.groupings) == 1 else [j]
        for g in np.unique(labels):
            members = np.flatnonzero(labels == g)
            for c in columns:
                group_values = sorted(values[members, c].tolist())
                m = len(group_values)
                expected = (sum(group_values) / m if how == "mean"
                            else (group_values[(m - 1) // 2] + group_values[m // 2]) / 2)
                assert np.allclose(result.released[members, c], expected, rtol=1e-12, atol=1e-9)
    released = result.released.tolist()
    assert result.quality["information_loss"]["sse_sst"] == pytest.approx(ref.sse_sst(rows, released), rel=1e-9, abs=1e-12)
    assert result.quality["record_linkage_risk"] == pytest.approx(ref.linkage_risk(rows, released), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [2, 3, 5])
def test_mdav_matches_plain_reference(seed: int, k: int) -> None:
    # continuous values: no distance ties, so the partition is unique
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3 * k, 120))
    values = rng.standard_normal((n, 3)) * np.array([1.0, 20.0, 0.1]) + rng.standard_normal(3)
    result = microaggregate_array(values, k, "mdav", quality=False)
    assert partition(result.groupings[0]) == {frozenset(g) for g in ref.mdav(values.tolist(), k)}


@pytest.mark.parametrize("seed", range(4))
def test_mdav_bounds_and_relisting_match_reference(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # tiny scan blocks and an eager re-centring make the triangle-inequality bounds, the
    # re-centred radius list and compaction all run on a table the plain reference can check
    import fedanon.microagg.mdav as mdav

    monkeypatch.setattr(mdav, "FIRST_BLOCK", 2)
    monkeypatch.setattr(mdav, "RELIST_FRACTION", 0.0)
    rng = np.random.default_rng(100 + seed)
    values = rng.standard_normal((150, 3)) * np.array([3.0, 1.0, 0.5]) + np.array([5.0, 0.0, 0.0])
    values[:, 0] = np.abs(values[:, 0]) ** 1.5  # skewed: the centroid drifts as groups leave
    result = microaggregate_array(values, 3, "mdav", quality=False)
    assert partition(result.groupings[0]) == {frozenset(g) for g in ref.mdav(values.tolist(), 3)}


def test_mdav_large_input_matches_reference_partition_sizes() -> None:
    # a few thousand records exercise compaction and re-centring of the radius list
    rng = np.random.default_rng(7)
    values = rng.standard_normal((3000, 2))
    labels = microaggregate_array(values, 4, "mdav", quality=False).groupings[0]
    sizes = np.bincount(labels)
    assert sizes.min() == 4 and sizes.max() <= 7 and sizes.sum() == 3000
    reference = {frozenset(g) for g in ref.mdav(values[:300].tolist(), 4)}
    assert partition(microaggregate_array(values[:300], 4, "mdav", quality=False).groupings[0]) == reference


def test_dataframe_api_keeps_roles() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"name": ["a", "b", "c", "d"], "age": [20, 22, 40, 42], "ward": ["x", "y", "x", "y"]})
    out, result = fedanon.microaggregate(frame, ["age"], k=2, insensitive=["ward"])
    assert list(out.columns) == ["age", "ward"]  # 'name' has no role: removed
    assert out["age"].tolist() == [21, 21, 41, 41]
    assert out["ward"].tolist() == ["x", "y", "x", "y"]
    assert result.quality["groups"]["groups"] == 2
    columns, _ = microaggregate({"age": [20, 22, 40, 42]}, k=2)
    assert columns["age"].tolist() == [21, 21, 41, 41]
