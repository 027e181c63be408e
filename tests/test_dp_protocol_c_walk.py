"""Protocol C's DP walk, each side alone: the helper answers only the walk's requests, the key
holder only the sums it asked for (the whole run is in test_dp_protocols.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedanon.crypto.counters import generate_counter_key
from fedanon.errors import ProtocolError
from fedanon.protocols.c.dp_release import CandidateScores, serve_walk
from fedanon.protocols.kit import codec

HEIGHTS = [3, 2]   # top (2, 1); specializations of the top: (1, 1) and (2, 0)


class _Checker:
    """Stands in for the helper's checker: records which nodes it was asked to sum."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, ...]] = []

    def request(self, levels: tuple[int, ...]) -> bytes:
        self.asked.append(tuple(levels))
        return codec.pack_message({"control": json.dumps({"levels": list(levels), "classes": 1}).encode()})


def _serve(steps: list[dict]) -> tuple[_Checker, list[bytes], object]:
    checker, sent = _Checker(), []
    inbox = [json.dumps(s).encode() for s in steps]
    try:
        result = serve_walk(checker, HEIGHTS, lambda: inbox.pop(0), sent.append, lambda: None)  # type: ignore[arg-type]
    except ProtocolError as exc:
        result = exc
    return checker, sent, result


def test_the_helper_sums_the_walk_and_returns_the_named_transformation() -> None:
    checker, sent, result = _serve([{"pivot": None, "nodes": [[2, 1]]},
                                    {"pivot": [2, 1], "nodes": [[1, 1], [2, 0]]},
                                    {"pivot": [1, 1], "nodes": [[0, 1], [1, 0]]},
                                    {"final": [1, 0], "dp": {"k": 3}}])
    assert result == ((1, 0), {"k": 3}, 5)
    assert checker.asked == [(2, 1), (1, 1), (2, 0), (0, 1), (1, 0)] and len(sent) == 3


@pytest.mark.parametrize("steps", [
    [{"pivot": None, "nodes": [[1, 1]]}],                                    # not the start
    [{"pivot": None, "nodes": [[2, 1]]}, {"pivot": None, "nodes": [[2, 1]]}],  # the start twice
    [{"pivot": None, "nodes": [[2, 1]]}, {"pivot": [2, 1], "nodes": [[0, 0]]}],  # not a specialization
    [{"pivot": None, "nodes": [[2, 1]]}, {"pivot": [1, 1], "nodes": [[0, 1]]}],  # from a node never summed
    [{"pivot": None, "nodes": [[2, 1]]}, {"pivot": [2, 1], "nodes": [[1, 1]]}],  # a candidate left out
    [{"pivot": None, "nodes": [[2, 1]]}, {"pivot": [2, 1], "nodes": [[1, 1], [2, 0]]},
     {"pivot": [2, 1], "nodes": [[1, 1]]}],                                  # the same pivot again
    [{"pivot": None, "nodes": [[2, 1]]}, {"final": [0, 0], "dp": {}}],       # a release never scored
    [{"pivot": None, "nodes": [[2, 5]]}],                                    # outside the lattice
])
def test_the_helper_refuses_requests_off_the_walk(steps: list[dict]) -> None:
    """A key holder that asked for any node's class sums would learn class sizes the walk never needs."""
    checker, _, result = _serve(steps)
    assert isinstance(result, ProtocolError)
    assert len(checker.asked) <= 3   # nothing beyond what the walk had reached was summed


@pytest.fixture(scope="module")
def key():  # noqa: ANN201
    return generate_counter_key("elgamal")


def _sums(key, nodes: list[list[int]], sizes: list[list[int]], fractions: list[list[list[float]]]) -> bytes:  # noqa: ANN001
    """What the helper sends: per node its classes' encrypted sizes and loss fractions."""
    public = key.public_key
    parts = {"control": json.dumps({"nodes": nodes}).encode()}
    for j, (node, s, f) in enumerate(zip(nodes, sizes, fractions)):
        loaded = public.load(public.encrypt_values(s))
        blob = public.sums_message(public.sum_by_class(loaded, list(range(len(s))), len(s)), [10] * len(s))
        parts[f"node/{j}"] = codec.pack_message({
            "control": json.dumps({"levels": node, "classes": len(s)}).encode(), "sizes": blob,
            "weights": np.asarray(f, dtype="<f8").tobytes()})
    return codec.pack_message(parts)


def _score(key, answer: bytes, nodes: list[tuple[int, ...]], n_rows: int = 5):  # noqa: ANN001, ANN202
    asked: list[bytes] = []
    scores = CandidateScores(key, n_rows, 2, 2, asked.append, lambda: answer)
    got = scores((2, 1), nodes)
    assert json.loads(asked[0]) == {"pivot": [2, 1], "nodes": [list(n) for n in nodes]}
    return got, scores


def test_the_key_holder_scores_from_the_decrypted_sizes(key) -> None:  # noqa: ANN001
    """By hand, k = 2, 5 real rows, 2 QIs: classes of 3, 0 (pseudotuples only) and 2 rows. Both
    real classes are kept; cells cost 3·0.5 + 3·0 + 2·0.25 + 2·1 = 4; score -4 / (2·(k-1)) = -2.
    The second node's class of 1 row is suppressed: 4 + 2·1 (its row, both QIs) = 6 -> -3."""
    answer = _sums(key, [[1, 1], [2, 0]], [[3, 0, 2], [4, 1]],
                   [[[0.5, 0.0], [1.0, 1.0], [0.25, 1.0]], [[0.5, 0.5], [0.0, 1.0]]])
    got, scores = _score(key, answer, [(1, 1), (2, 0)])
    assert got == [-2.0, -3.0] and scores.losses == {(1, 1): 4.0, (2, 0): 6.0}


@pytest.mark.parametrize("nodes, sizes, fractions, message", [
    ([[2, 0]], [[3, 2]], [[[0, 0], [0, 0]]], "other candidates"),
    ([[1, 1]], [[3, 1]], [[[0, 0], [0, 0]]], "do not add up"),
    ([[1, 1]], [[3, 2]], [[[0, 0], [0, 1.5]]], "loss fractions"),
])
def test_the_key_holder_refuses_sums_it_did_not_ask_for(key, nodes, sizes, fractions, message) -> None:  # noqa: ANN001
    with pytest.raises(ProtocolError, match=message):
        _score(key, _sums(key, nodes, sizes, fractions), [(1, 1)])
