"""The helper's encrypted per-class sums (Protocol C) decrypt to the true per-class counts for
every node, whichever source they were rolled up from: cached finer nodes, hubs or the bottom.

The truth is counted here from the plaintext grouping of the padded rows and the real-row
flags (numpy), not from the roll-up code under test. ElGamal keeps it fast; the Paillier
roll-ups over pool workers are covered in test_counted_checks.py.
"""

from __future__ import annotations


import numpy as np
import pytest

from fedanon.crypto import paillier_rows
from fedanon.crypto.counters import generate_counter_key
from fedanon.engine import AnonymizationConfig, EncodedTable, read_table_csv
from fedanon.engine.anonymizer import prepare_structure
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.data.hierarchy import Hierarchy
from fedanon.protocols.c import class_sums
from fedanon.protocols.c.class_sums import NodeSums
from fedanon.protocols.c.pseudotuples import resample_rows

from datasets import ADULT_DIR as ADULT
QIS = ["sex", "age", "race", "marital-status", "education", "workclass"]


@pytest.fixture(scope="module")
def padded():
    columns, rows = read_table_csv(ADULT / "adult.csv")
    rng = np.random.default_rng(7)
    rows = [rows[i] for i in sorted(rng.choice(len(rows), size=900, replace=False).tolist())]
    fakes = resample_rows(rows, len(rows) // 4, rng=rng)
    real = np.r_[np.ones(len(rows), bool), np.zeros(len(fakes), bool)]
    order = rng.permutation(len(rows) + len(fakes))
    table = EncodedTable.from_rows(columns, [(rows + fakes)[i] for i in order])
    hier = {a: Hierarchy.read_csv(ADULT / f"adult_hierarchy_{a}.csv", a) for a in QIS + ["occupation"]}
    return table, hier, real[order]


def _truth(structure, levels, codes: np.ndarray, real: np.ndarray, attr: str | None):
    """Real rows per class of `codes` (and per (class, sensitive code) cell), from the rows."""
    grouped = structure.grouper.group_rows(levels, keep_rows=True)
    key_of = {tuple(c): j for j, c in enumerate(np.asarray(grouped.codes).tolist())}
    at = np.array([key_of[tuple(c)] for c in np.asarray(codes).tolist()])  # grouped class of each asked class
    row_class = np.asarray(grouped.row_class, dtype=np.int64)
    sizes = np.bincount(row_class, weights=real, minlength=grouped.count).astype(int)[at]
    if attr is None:
        return sizes, None
    d = structure.grouper.sensitive_sizes[attr]
    cells = np.bincount(row_class * d + structure.grouper.sensitive_codes[attr], weights=real,
                        minlength=grouped.count * d).astype(int).reshape(grouped.count, d)[at]
    return sizes, cells.ravel()


@pytest.mark.parametrize("attr", [None, "occupation"])
def test_every_node_sums_to_the_true_counts_via_any_source(padded, attr, monkeypatch):
    table, hier, real = padded
    config = AnonymizationConfig(QIS, k=2) if attr is None else \
        AnonymizationConfig(QIS, k=2, l_diversity=LDiversity("distinct", 2, attr))
    structure = prepare_structure(table, hier, config, require_subset=False)
    key = generate_counter_key("elgamal")
    pub = key.public_key
    attributes = [] if attr is None else [attr]
    sums = NodeSums(structure, pub, pub.load(pub.encrypt_counters(real.tolist())), None, attributes)
    rng = np.random.default_rng(1)
    lattice = structure.lattice
    visited = [lattice.node_levels(int(n)) for n in rng.permutation(lattice.size)[:70]]
    for levels in visited:
        classes, rolled = structure.grouper.classes(levels, keep_rows=True)
        got = sums.node(classes, rolled)
        sizes, cells = _truth(structure, levels, classes.codes, real, attr)
        name = "sizes" if attr is None else f"hist/{attr}"
        encrypted, bounds = got[name]
        want = sizes if attr is None else cells
        decrypted = key.decrypt_class_counts(pub.sums_message(encrypted, bounds.tolist()), len(want))
        assert decrypted == want.tolist(), levels
        assert (np.asarray(bounds) >= want).all()  # the bounds count pseudotuples too
    assert sums.row_sums == 1  # only the bottom node was summed from the rows
    assert sums.hubs > 0  # some path heads went through a hub
    sums.close()


def test_a_hub_saves_roll_up_work(padded, monkeypatch):
    """The multiplications hubs save are real: the same nodes cost fewer homomorphic
    additions with hubs than with every path head rolled up from the bottom."""
    table, hier, real = padded
    pub = generate_counter_key("elgamal").public_key
    loaded = pub.load(pub.encrypt_counters(real.tolist()))
    lattice = prepare_structure(table, hier, AnonymizationConfig(QIS, k=2), require_subset=False).lattice
    rng = np.random.default_rng(2)
    nodes = [lattice.node_levels(int(n)) for n in rng.permutation(lattice.size)[:60]]

    def additions(hub_share: float) -> int:
        monkeypatch.setattr(class_sums, "HUB_SHARE", hub_share)
        structure = prepare_structure(table, hier, AnonymizationConfig(QIS, k=2), require_subset=False)
        sums = NodeSums(structure, pub, loaded, None, [])
        counted = []
        inner = sums.rolled

        def rolled(mapping, n, base):
            counted.append(len(mapping))
            return inner(mapping, n, base)

        sums.rolled = rolled  # type: ignore[method-assign]
        for levels in nodes:
            sums.node(*structure.grouper.classes(levels, keep_rows=True))
        return sum(counted)

    without, with_hubs = additions(0.0), additions(0.6)
    assert with_hubs < without


@pytest.mark.parametrize("attr", [None, "occupation"])
def test_screening_sums_are_the_product_of_the_small_classes_rows(padded, attr, monkeypatch):
    """Paillier screening sums (`selected_sum` with the size threshold): whichever way they are
    formed -- directly, as the complement, or as a source's cached total below the threshold
    minus what is not picked -- the ciphertext is exactly the product of the row counters of
    the picked classes' rows (computed here from the rows), and decrypts to their real rows.
    A wrong subtraction, a stale cached total or a wrongly assumed subset would change it."""
    table, hier, real = padded
    k = 4
    config = AnonymizationConfig(QIS, k=k) if attr is None else \
        AnonymizationConfig(QIS, k=k, l_diversity=LDiversity("distinct", 2, attr))
    structure = prepare_structure(table, hier, config, require_subset=False)
    key = generate_counter_key("paillier")
    pub = key.public_key
    rows = pub.key.ciphertexts_from_bytes(b"".join(pub.encrypt_counters(real.tolist(), workers=1)))
    # the bottom's and the hubs' sums go to the pool workers, as on full-size tables
    monkeypatch.setattr(paillier_rows, "MIN_PARALLEL_ROWS", 16)
    monkeypatch.setattr(paillier_rows, "MIN_PARALLEL_SUBSET", 8)
    shared = []
    inner_share = pub.share_sums

    def share(values, workers=None):
        out = inner_share(values, workers)
        shared.append(out)
        return out

    pub.share_sums = share  # type: ignore[method-assign]
    sums = NodeSums(structure, pub, rows, None, [] if attr is None else [attr])
    differences = []
    inner = pub.difference

    def counted(total, part):
        differences.append(1)
        return inner(total, part)

    pub.difference = counted  # type: ignore[method-assign]
    earlier = []
    inner_earlier = sums._via_earlier

    def via_earlier(*args):
        out = inner_earlier(*args)
        earlier.append(out is not None)
        return out

    sums._via_earlier = via_earlier  # type: ignore[method-assign]
    rng = np.random.default_rng(4)
    lattice = structure.lattice
    n2 = int(pub.key.nsquare)
    heights = [int(h) for h in lattice.node_levels(lattice.size - 1)]
    path = [tuple([0] * len(heights))]  # a search path: one attribute one level up per step
    while any(a < h for a, h in zip(path[-1], heights)):
        up = list(path[-1])
        i = int(rng.choice([j for j, (a, h) in enumerate(zip(up, heights)) if a < h]))
        up[i] += 1
        path.append(tuple(up))
    nodes = path + [tuple(lattice.node_levels(int(n))) for n in rng.permutation(lattice.size)[:25]]
    for levels in nodes:
        classes, rolled = structure.grouper.classes(levels, keep_rows=True)
        if rng.random() < 0.5:
            sums.node(classes, rolled)  # cache some nodes, as full checks do
        small = np.asarray(classes.stats.sizes) < k
        total, bound, complement = sums.selected_sum(classes, small, threshold=k)
        grouped = structure.grouper.group_rows(levels, keep_rows=True)
        key_of = {tuple(c): j for j, c in enumerate(np.asarray(grouped.codes).tolist())}
        at = np.array([key_of[tuple(c)] for c in np.asarray(classes.codes).tolist()])
        small_grouped = np.zeros(grouped.count, dtype=bool)
        small_grouped[at[small]] = True
        in_sum = small_grouped[np.asarray(grouped.row_class)] ^ complement
        want = 1
        for c in np.asarray(rows, dtype=object)[in_sum]:
            want = want * int(c) % n2
        assert int(total[0]) == want, levels
        assert key.decrypt_class_counts(pub.sums_message(total, [bound]), 1) == [int(real[in_sum].sum())]
        assert bound == int(in_sum.sum())
    assert len(differences) > 5  # sums were formed by difference (earlier screenings, cached totals)
    assert sum(earlier) >= 3  # ... among them from the previous node of the path
    assert sums.hubs > 0 and len(shared) > 1 and any(s._block is not None for s in shared)
    sums.close()
    assert all(s._block is None for s in shared)  # every shared block (bottom, hubs) released
