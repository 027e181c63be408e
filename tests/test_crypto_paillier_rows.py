"""Paillier per-class sums over pool workers (shared-memory rows) equal the in-process sums."""

import random

import numpy as np
import pytest

from fedanon.crypto import paillier, paillier_rows
from fedanon.crypto.counters import counter_values, generate_counter_key
from fedanon.crypto.paillier_rows import SharedPaillierRows


@pytest.fixture(scope="module")
def key():
    return generate_counter_key("paillier")


def test_sums_over_workers_equal_in_process_sums(key, monkeypatch):
    monkeypatch.setattr(paillier_rows, "MIN_PARALLEL_ROWS", 16)
    pk = key.public_key.key
    rng = random.Random(3)
    bits = [rng.random() < 0.7 for _ in range(40)]
    base = pk.encrypt_many(counter_values(bits), workers=1)
    rows = [base[i % 40] for i in range(600)]  # valid ciphertexts; repeats are fine for sums
    truth = [int(bits[i % 40]) for i in range(600)]
    shared = SharedPaillierRows(pk, rows, workers=2)
    try:
        assert shared._block is not None  # the rows really went to shared memory
        for n_classes in (1, 5, 97, 600):
            ids = [rng.randrange(n_classes) for _ in rows]
            got = shared.sum_by_class(ids, n_classes)
            assert got == pk.sum_by_class(rows, ids, n_classes)  # identical ciphertexts, in class order
            expected = np.bincount(ids, weights=truth, minlength=n_classes).astype(int).tolist()
            message = key.public_key.sums_message(got, [600] * n_classes)
            assert key.decrypt_class_counts(message, n_classes) == expected
        with pytest.raises(ValueError):
            shared.sum_by_class([0] * 599, 1)
        with pytest.raises(ValueError):
            shared.sum_by_class([3] * 600, 2)
    finally:
        name = shared._block.name if shared._block is not None else None
        shared.close()
    if name is not None:  # closed means unlinked: the block is gone
        from multiprocessing import shared_memory

        with pytest.raises(FileNotFoundError):
            shared_memory.SharedMemory(name=name)


def test_counter_key_loads_for_all_cores_and_unloads(key, monkeypatch):
    monkeypatch.setattr(paillier_rows, "MIN_PARALLEL_ROWS", 16)
    pub = key.public_key
    real = [i % 3 != 0 for i in range(60)]
    loaded = pub.load(pub.encrypt_counters(real, workers=1), workers=2)
    try:
        ids = [i % 7 for i in range(60)]
        message = pub.sums_message(pub.sum_by_class(loaded, ids, 7), [9] * 7)
        assert key.decrypt_class_counts(message, 7) == [sum(r for r, j in zip(real, ids) if j == c) for c in range(7)]
        final = pub.sums_message(loaded, [3] * 60, list(range(59, -1, -1)))  # packed row counters, reversed
        assert key.decrypt_class_counts(final, 60) == [int(r) for r in reversed(real)]
    finally:
        pub.unload(loaded)


def test_subset_sum_over_workers_is_the_plain_sum_of_exactly_those_entries(key, monkeypatch):
    """A screening sum over shared sums: split over the workers it is the very product of the
    picked entries (each entry once, none other) and decrypts to the plaintext total; an entry
    out of range is refused, not wrapped round."""
    monkeypatch.setattr(paillier_rows, "MIN_PARALLEL_ROWS", 16)
    monkeypatch.setattr(paillier_rows, "MIN_PARALLEL_SUBSET", 8)
    pub = key.public_key
    pk = pub.key
    values = [i % 5 for i in range(300)]
    shared = pub.share_sums(pk.encrypt_many(values, workers=1), workers=2)
    rng = random.Random(5)
    try:
        assert isinstance(shared, SharedPaillierRows) and shared._block is not None
        for size in (0, 3, 8, 77, 300):
            rows = sorted(rng.sample(range(300), size))
            got = pub.subset_sum(shared, rows)
            assert got == paillier.class_products(((shared[r], 0) for r in rows), 1, pk.nsquare)
            message = pub.sums_message(got, [4 * 300])
            assert key.decrypt_class_counts(message, 1) == [sum(values[r] for r in rows)]
        with pytest.raises(ValueError):
            shared.subset_sum([0, 300])
    finally:
        pub.unload(shared)


def test_grouped_sums_over_workers_equal_plain_sums_for_both_schemes(key, monkeypatch):
    """The helper's suppression marginals: one sum per class of every grouping, spread over the
    workers for Paillier, equal to the plaintext sums per grouping (and to ElGamal's path)."""
    from fedanon.crypto import counters

    monkeypatch.setattr(counters, "_GROUPED_MIN_WORK", 8)
    rng = random.Random(7)
    values = [rng.choice([0, 0, 1, 3]) for _ in range(120)]
    groupings = [(np.asarray([rng.randrange(d) for _ in values]), d) for d in (1, 2, 9, 40)]
    for scheme_key in (key, generate_counter_key("elgamal")):
        pub = scheme_key.public_key
        sums = pub.grouped_sums(pub.encrypt_values(values, workers=1), groupings, workers=2)
        assert len(sums) == len(groupings)
        for (ids, d), s in zip(groupings, sums):
            message = pub.sums_message(s, [3 * len(values)] * d)
            assert scheme_key.decrypt_class_counts(message, d) == \
                np.bincount(ids, weights=values, minlength=d).astype(int).tolist()
    with pytest.raises(ValueError):
        key.public_key.grouped_sums(key.public_key.encrypt_values(values[:20], workers=1), [(np.arange(20), 5)],
                                    workers=2)
