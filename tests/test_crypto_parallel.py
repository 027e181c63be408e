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


class _RecordingPool:
    """Stands in for the process pool: runs each task at submit, records submits and waits."""

    def __init__(self, events):
        self.events = events

    def submit(self, fn, chunk):
        from concurrent.futures import Future

        self.events.append(("submit", len(chunk)))
        future, events = Future(), self.events
        future.set_result(fn(chunk))
        real_result = future.result

        def result(timeout=None):
            events.append(("wait", None))
            return real_result(timeout)

        future.result = result
        return future


def test_progress_submits_every_chunk_before_waiting_and_ticks_per_chunk(monkeypatch):
    """A batch with progress: all chunks (at most `items` each) are in the pool before the
    first result is awaited, and one tick follows each chunk's results, in order."""
    events = []
    monkeypatch.setattr(parallel, "_pool", lambda w: _RecordingPool(events))
    progress = parallel.ChunkProgress(lambda: events.append(("tick", None)), 100)  # below the default 125
    out = parallel.map_batches(functools.partial(_square_with_pid, 0), list(range(1000)), workers=2,
                               min_parallel=10, progress=progress)
    assert [v for v, _ in out] == [x * x for x in range(1000)]
    kinds = [k for k, _ in events]
    assert kinds == ["submit"] * 10 + ["wait", "tick"] * 10
    assert [n for k, n in events if k == "submit"] == [100] * 10


def test_progress_ticks_per_chunk_in_process_too():
    ticks = []
    out = parallel.map_batches(functools.partial(_square_with_pid, 0), list(range(10)), workers=1,
                               progress=parallel.ChunkProgress(lambda: ticks.append(1), 3))
    assert [v for v, _ in out] == [x * x for x in range(10)] and len(ticks) == 4


def test_a_failing_tick_is_not_taken_for_a_broken_pool(monkeypatch):
    """A tick's own error (e.g. the transport failing while sending a marker) propagates; it
    must not be mistaken for a broken pool and the whole batch silently redone in-process."""
    monkeypatch.setattr(parallel, "_pool", lambda w: _RecordingPool([]))
    calls = []

    def tick():
        calls.append(1)
        if len(calls) == 1:
            raise OSError("connection reset while sending a progress marker")

    with pytest.raises(OSError, match="progress marker"):
        parallel.map_batches(functools.partial(_square_with_pid, 0), list(range(100)), workers=2,
                             min_parallel=10, progress=parallel.ChunkProgress(tick, 10))
    assert len(calls) == 1
