"""SafePub in Protocol C: the key holder scores and draws, the helper sums and generalizes.

C's helper never sees a class size, so it cannot score SafePub's candidates; the key holder
already decrypts the class sizes of the nodes it judges. In a DP run the roles of the
search therefore swap (`protocols/dp/release.py` describes the primaries' sampling, which is
B's: before anything is padded or encrypted):

           key holder -> helper     c/dp-step   the transformation just drawn (none: the start) and
                                                its specializations not yet scored, or at the end the
                                                transformation to release and the report's `dp` entry
           helper     -> key holder c/dp-sums   per candidate: the permuted encrypted class sizes and,
                                                in the same order, each class's loss fraction per QI

one round trip per step of the walk (a step whose candidates were all scored before needs
none). The key holder runs `engine.safepub.search`, the local release's walk and draw, with
a batch scorer that computes `engine.safepub.granularity_loss` from the decrypted sizes: a
sum over (class, QI) terms that does not depend on the classes' order, so the key holder
computes the same bits as the local release on the pooled sample, and a seeded run draws
the same transformations. Classes of pseudotuples only decrypt to 0 and add nothing.

The helper checks every request against the walk (the start first, then the not yet scored
specializations of a node it already sent, each node's once): the key holder cannot ask for the class
sizes of a node the walk does not reach. The release itself is C's ordinary output path:
the helper generalizes with the drawn transformation, the key holder drops the pseudotuples
and suppresses every class below the release's k (`judge_config`: k-anonymity, no
suppression limit), then checks the tallies and the result and decrypts.

What each party learns beyond an ordinary C run over the sample: the key holder the class
sizes of every candidate scored, and per class the loss fraction of each of its generalized
values (the share of the hierarchy's leaves below it, as with the loss metric) -- never a
value; the helper the drawn transformation of every step (the report names them anyway).
"""

from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np

from fedanon.crypto.counters import CounterPrivateKey
from fedanon.dp.accounting import Ledger
from fedanon.engine.safepub import (
    describe,
    granularity_loss,
    granularity_score,
    release_k,
    search,
    spend_anonymization,
    specializations,
)
from fedanon.errors import ProtocolError
from fedanon.model.config import AnonymizationConfig
from fedanon.protocols.c.counted_checks import EncryptedCountChecker
from fedanon.protocols.dp.release import (
    NO_LIMIT,
    dp_model,
    keep_persons,
    keep_rows,
    party_randomness,
    sampled,
    search_facts,
)
from fedanon.protocols.kit import codec
from fedanon.protocols.kit.api import LocalData

PROTOCOL = "C"
STEP = "c/dp-step"
SUMS = "c/dp-sums"
#: the search party's algorithm, as the local release names it in its report
ALGORITHM = "SafePub (exponential mechanism over the lattice; key holder draws)"

Node = tuple[int, ...]


def is_dp(config: AnonymizationConfig) -> bool:
    return dp_model(config) is not None


def judge_config(config: AnonymizationConfig) -> AnonymizationConfig:
    """What the helper's structure and the key holder's judge work with in a DP run:
    k-anonymity with the release's k and no suppression limit (SafePub suppresses every class
    below k), and the loss metric, whose per-class weights are the loss fractions the score
    needs (`EncryptedCountChecker.request` sends them with the sizes)."""
    config.ensure_valid()
    return AnonymizationConfig(list(config.quasi_identifiers), k=release_k(config), suppression=NO_LIMIT,
                               metric="loss")


def checked_config(config: AnonymizationConfig, options: dict[str, Any]) -> AnonymizationConfig:
    """The config C's roster checks (`counted_checks.check_supported`); refuses what a DP run
    cannot combine with before any data moves."""
    if not is_dp(config):
        return config
    if options.get("aggregate_means"):
        raise ProtocolError("option aggregate_means cannot be combined with --dp: the class means of the "
                            "release would need their own share of the budget")
    return judge_config(config)


# ----------------------------------------------------------------------------- primaries


def sample_share(config: AnonymizationConfig, party: str, local: LocalData, shared_key: bytes, vertical: bool,
                 run_id: str) -> tuple[LocalData, np.ndarray]:
    """This primary's sample, drawn before any pseudotuple is made, and its kept row numbers.

    Horizontal: each row with probability β from the party's own randomness; vertical: by the
    keyed PRF of the TID under `shared_key` (C's release tally key, derived from the TID key,
    which the helper never sees), so every primary keeps the same persons.
    """
    if vertical and local.tid_column is not None:
        t = local.columns.index(local.tid_column)
        keep = keep_persons(config, shared_key, PROTOCOL, run_id, [row[t] for row in local.rows])
    else:
        keep = keep_rows(config, party, len(local.rows))
    return sampled(local, keep), np.flatnonzero(keep)


# ----------------------------------------------------------------------------- helper side


def serve_walk(checker: EncryptedCountChecker, heights: list[int], receive: Callable[[], bytes],
               send: Callable[[bytes], None], tick: Callable[[], None]) -> tuple[Node, dict[str, Any], int]:
    """Answer the key holder's steps until it names the transformation to release.

    Returns that transformation, the report's `dp` entry the key holder sent and the number
    of candidates whose sums were sent.
    """
    top = tuple(int(h) - 1 for h in heights)
    scored: set[Node] = set()
    pivots: set[Node] = set()
    while True:
        control = _json(receive(), "DP step")
        if "final" in control:
            final = _node(control["final"], heights)
            dp = control.get("dp")
            if final not in scored or not isinstance(dp, dict):
                raise ProtocolError("the key holder named a transformation the walk did not score")
            return final, dp, len(scored)
        pivot = None if control.get("pivot") is None else _node(control["pivot"], heights)
        nodes = [_node(n, heights) for n in control.get("nodes", [])]
        if pivot is None:
            expected = [] if scored else [top]
        elif pivot in scored and pivot not in pivots:
            expected = [n for n in specializations(pivot) if n not in scored]
            pivots.add(pivot)
        else:
            expected = []
        if not nodes or nodes != expected:
            raise ProtocolError("the key holder asked for the class sums of nodes the walk does not reach")
        parts = {"control": json.dumps({"nodes": [list(n) for n in nodes]}).encode()}
        for j, node in enumerate(nodes):
            parts[f"node/{j}"] = checker.request(node)
        scored.update(nodes)
        send(codec.pack_message(parts))
        tick()


def _json(blob: bytes, what: str) -> dict[str, Any]:
    try:
        data = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError(f"corrupt {what}") from None
    if not isinstance(data, dict):
        raise ProtocolError(f"corrupt {what}")
    return data


def _node(value: Any, heights: list[int]) -> Node:
    if not isinstance(value, list) or len(value) != len(heights) or \
            not all(isinstance(x, int) and 0 <= x < h for x, h in zip(value, heights)):
        raise ProtocolError("a DP step names no node of the lattice")
    return tuple(value)


# ----------------------------------------------------------------------------- key holder side


class CandidateScores:
    """The key holder's batch scorer: one round trip per step, the local release's score."""

    def __init__(self, key: CounterPrivateKey, n_rows: int, k: int, n_qis: int,
                 send: Callable[[bytes], None], receive: Callable[[], bytes]) -> None:
        self.key, self.n_rows, self.k, self.q = key, n_rows, k, n_qis
        self.send, self.receive = send, receive
        self.losses: dict[Node, float] = {}
        self.round_trips = 0

    def __call__(self, pivot: Node | None, nodes: list[Node]) -> list[float]:
        wanted = [list(n) for n in nodes]
        self.send(json.dumps({"pivot": None if pivot is None else list(pivot), "nodes": wanted}).encode())
        self.round_trips += 1
        parts = codec.unpack_message(self.receive(), "candidate sums")
        if _json(codec.require_part(parts, "control", "candidate sums"), "candidate sums").get("nodes") != wanted:
            raise ProtocolError("the helper sent the sums of other candidates than asked for")
        scores = []
        for j, node in enumerate(nodes):
            loss = self._loss(node, codec.unpack_message(codec.require_part(parts, f"node/{j}", "candidate sums"),
                                                         "candidate sums"))
            self.losses[node] = loss
            scores.append(granularity_score(loss, self.q, self.k))
        return scores

    def _loss(self, node: Node, parts: dict[str, bytes]) -> float:
        control = _json(codec.require_part(parts, "control", "candidate sums"), "candidate sums")
        n = control.get("classes")
        if control.get("levels") != list(node) or not isinstance(n, int) or not 0 < n <= 1 << 31:
            raise ProtocolError("malformed candidate sums")
        sizes = np.asarray(self.key.decrypt_class_counts(codec.require_part(parts, "sizes", "candidate sums"), n,
                                                         workers=None), dtype=np.int64)
        weights = np.frombuffer(codec.require_part(parts, "weights", "candidate sums"), dtype="<f8")
        if weights.size != n * self.q or not np.all((weights >= 0) & (weights <= 1)):
            raise ProtocolError("malformed loss fractions in the candidate sums")
        if (sizes < 0).any() or int(sizes.sum()) != self.n_rows:
            raise ProtocolError("the candidate's class sizes do not add up to the table's real rows")
        return granularity_loss(sizes, weights.reshape(n, self.q), self.n_rows, self.k)


def key_holder_walk(key: CounterPrivateKey, config: AnonymizationConfig, party: str, protocol: str,
                    heights: list[int], n_rows: int, send: Callable[[bytes], None],
                    receive: Callable[[], bytes]) -> tuple[Node, dict[str, Any], int]:
    """Run SafePub's walk with the helper's sums, tell the helper the transformation to release.

    Returns it, the report's `dp` entry (the local release's, plus who drew) and the round trips.
    """
    model = dp_model(config)
    params = model.parameters()
    k = release_k(config)
    rng = party_randomness(config, party)
    ledger = Ledger()
    scores = CandidateScores(key, n_rows, k, len(heights), send, receive)
    trace = search(tuple(int(h) - 1 for h in heights), scores, params, rng, ledger, final=model.final)
    spend_anonymization(ledger, params, k, rng)
    dp = describe(params, k, model.final, n_rows, rng, trace, ledger)
    dp["granularity_loss_of_sample"] = scores.losses[trace.chosen] / (n_rows * len(heights))
    dp.update(search_facts(protocol, party))
    send(json.dumps({"final": list(trace.chosen), "dp": for_helper(dp)}).encode())
    return trace.chosen, dp, scores.round_trips


#: figures of the `dp` entry computed from the true rows: the scores and losses are functions of
#: class sizes, which C's helper never learns (the sample's size it could infer from the padded
#: row count, pseudotuples being a fixed share, as it infers the row count in an ordinary run)
COUNTED = ("sampled_rows", "granularity_loss_of_sample")


def for_helper(dp: dict[str, Any]) -> dict[str, Any]:
    """The `dp` entry without the figures computed from the true rows: the parameters, k, the
    draws and the budget, which follow from the settings and the transformations the helper saw."""
    out = {key: value for key, value in dp.items() if key not in COUNTED}
    out["search"] = {key: value for key, value in dp["search"].items() if key != "chosen_score"}
    return out
