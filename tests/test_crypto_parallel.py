"""The process-pool batch helper: order, serial fallback, argument checks."""

import functools
import os

import pytest

from fedanon.crypto import parallel


def _square_with_pid(offset, chunk):
    return [(x * x + offset, os.getpid()) for x in chunk]


def test_results_keep_input_order_across_workers():
    items = list(range(10_000))
    out = parallel.map_batches(functools.partial(_square_with_pid, 1), items, workers=2, min_parallel=100)
    assert [v for v, _ in out] == [x * x + 1 for x in items]
    if parallel.available_cores() > 1:
        assert os.getpid() not in {p for _, p in out}


def test_small_batches_and_one_worker_stay_in_process():
    out = parallel.map_batches(functools.partial(_square_with_pid, 0), [3, 4], workers=2)
    assert out == [(9, os.getpid()), (16, os.getpid())]
    out = parallel.map_batches(functools.partial(_square_with_pid, 0), list(range(5000)), workers=1)
    assert {p for _, p in out} == {os.getpid()}


def test_worker_count_is_validated():
    assert parallel.resolve_workers(None) == parallel.available_cores()
    assert parallel.resolve_workers(3) == 3
    with pytest.raises(ValueError):
        parallel.resolve_workers(-1)


def test_errors_in_workers_keep_their_type():
    from fedanon.crypto.commutative import EcCipher
    from fedanon.crypto.errors import EncodingError

    k = EcCipher.generate()
    x = EcCipher.hash_to_group([str(i).encode() for i in range(4000)], workers=1)
    x[3999] = b"\x00" * 5
    with pytest.raises(EncodingError, match=r"not a secp256k1.*\[in batch items 3500\.\.3999\]"):
        k.encrypt_many(x, workers=2)
