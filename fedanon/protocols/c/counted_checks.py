"""Protocol C's check seam: the helper groups and sums encrypted counters, the key holder judges.

The helper holds the integrated table *with pseudotuples* and one encrypted counter per
row (1 real, 0 fake; for delta-presence a second one, 1 for real research-subset rows).
For every node the search tests, `EncryptedCountChecker` (helper side, a `Checker`)

1. groups the node (rolled up from a finer node where the engine can),
2. sums the counters per class homomorphically -- per (class, sensitive code) cell when a
   model needs sensitive histograms (§4.7.2's per-value counter columns, formed at the
   helper from the encrypted sensitive column it holds anyway) -- rolling the *encrypted*
   sums up from the finer node's sums with the engine's class mapping,
3. permutes the classes with a fresh random permutation and sends the sums (packed, for
   Paillier) to the key holder.

`CountJudge` (key holder side) decrypts, drops classes whose true size is 0, and judges
the node with the engine's own `ClassJudge` -- criteria, suppression limit and metric
exactly as the centralized engine applies them. It answers only what the search uses:
anonymous / anonymous without suppression / implied-k condition, loss and bound.

The entropy metrics (§2.6.6, §3.6.2) need two more facts, both got without a cell value
reaching the key holder and without a count reaching the helper:

* once, at setup: per QI, the encrypted number of real rows per leaf value (in a fresh
  random order) and, per hierarchy level, which of those leaves share a generalized value
  (relabelled at random). The key holder decrypts them into the engine's `MetricContext`
  in that permuted space; the per-level entropy tables the engine computes from it are
  the centralized ones (sums over values, order-free), so every node's static loss is too;
* per check that suppresses rows at an anonymous node (only for `entropy` and
  `nonuniform-entropy`; the monotonic variant ignores suppression): the key holder
  encrypts, per class in its permuted order, the class's true size if it is suppressed
  and 0 otherwise, under its query key (the counter key if ElGamal, else a fresh ElGamal
  key of its own: `CountJudge.query_key`); the helper un-permutes them, sums them
  homomorphically per (QI, generalized value) at the node's levels and sends the sums in
  a fresh order per QI; the key holder decrypts the per-QI counts of suppressed rows and
  adds exactly what the engine's `suppressed_loss` adds.

Three shortcuts keep suppression cheap (docs/performance/protocol-c.md):

* a *screening sum* per check where the models imply a class size k: one encrypted number,
  the real rows in the classes whose padded size is below k (a lower bound of the rows the
  engine's implied-size test counts). Above the suppression limit the key holder answers
  "not anonymous" from it alone; otherwise it asks for the classes (`SEND_CLASSES`). With
  Paillier counters and a suppression limit the helper forms it from a second, ElGamal
  counter per row under the key holder's screening key (`screen_counters_wanted`);
* for the entropy metrics, the key holder's static loss table (per QI and level) with the
  search facts, so that the helper's search prunes by bound as the centralized one does;
* a node the screening sum did not decide is sent without its classes of padded size below k
  (`full_request`): they fail anyway and the screening sum told their rows.

What each side learns is listed in README's threat model (Protocol C subsection); in
short: the helper never sees a count, only the verdicts, losses and bounds of the nodes
it tests (plus, once, the suppression limit and implied class size). The key holder sees
true class sizes (and sensitive histograms / subset counts where a model needs them) of
each tested node in an order it cannot link to class contents, never a cell.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from fedanon.crypto.errors import KeyFormatError
from fedanon.crypto.counters import (
    CounterPrivateKey,
    CounterPublicKey,
    counter_public_key_from_bytes,
    generate_counter_key,
)
from fedanon.engine.anonymizer import Structure, metric_context
from fedanon.engine.check.checker import Checker, ClassJudge, NodeEvaluation, implied_class_size
from fedanon.model.metrics.registry import build_metric, metric_types
from fedanon.model.config import AnonymizationConfig
from fedanon.stats.classes import ClassStats
from fedanon.model.criterion import CriterionContext, build_criteria
from fedanon.stats.classes import Classes
from fedanon.stats.keys import group_keys
from fedanon.model.metrics.base import MetricContext
from fedanon.errors import InputError, ProtocolError
from fedanon.protocols.kit import codec
from fedanon.protocols.kit.cellcrypt import random_permutation
from fedanon.protocols.c.class_sums import NodeSums, Sums
from fedanon.protocols.c.projections import label_criteria, projection_labels, read_labels
from fedanon.protocols.registry import protocol_spec

#: Metrics Protocol C can optimize: its registry spec's list, or every metric the engine offers.
#: A metric whose class shares depend on the classes' values needs a weight channel from the helper;
#: `loss` has one (`_metric_context`), others are refused.
COUNTED_METRICS: tuple[str, ...] = protocol_spec("C").metrics or tuple(
    name for name, metric in metric_types().items() if not metric.needs_class_values or name == "loss")
#: Metrics whose loss needs every QI's value counts over the true rows (sent once, at setup):
#: the metric registry's `needs_value_marginals` trait.
ENTROPY_METRICS = tuple(name for name, metric in metric_types().items() if metric.needs_value_marginals)
#: Of those, the ones whose loss charges suppressed rows by their values (one extra round
#: per check that suppresses at an anonymous node): the `charges_suppressed_values` trait.
SUPPRESSION_MARGINAL_METRICS = tuple(name for name, metric in metric_types().items()
                                     if metric.charges_suppressed_values)
#: Metrics whose bound depends on a node's levels only (the key holder has it from setup), so a
#: node that fails the implied class size is answered from one screening sum (see `screen_request`).
SCREENED_METRICS = ENTROPY_METRICS


def check_supported(config: AnonymizationConfig) -> None:
    """Refuse, before any data moves, what Protocol C cannot check privately."""
    if config.metric not in COUNTED_METRICS:
        metric = metric_types().get(config.metric)
        if metric is not None and metric.needs_class_values:
            reason = ("a class's share of it depends on the class's generalized values, which C's key holder "
                      "never sees (it judges classes from counts alone)")
        else:
            reason = "it is not among the metrics Protocol C's registry entry lists"
        raise InputError(f"Protocol C does not support metric {config.metric!r}: {reason}; "
                         f"choose one of {', '.join(COUNTED_METRICS)}")


@dataclass
class RowCounters:
    """The helper's loaded counter columns, in the integrated table's row order."""

    real: object  # Enc(1) real row, Enc(0) pseudotuple
    subset: object | None = None  # Enc(1) real research-subset row, else Enc(0) (delta-presence)
    #: the same flags as `real` under the key holder's screening key (`screen_counters_wanted`)
    screen: object | None = None


@dataclass
class JudgeFacts:
    """What the key holder tells the helper once: the flags the search needs."""

    suppression_limit: int
    anonymity_monotone: bool
    strict_monotone: bool
    metric_monotone: bool
    implied_k: int
    #: the key holder answers a screening sum first (`EncryptedCountChecker.screen_request`)
    screen: bool = False
    #: entropy metrics: per QI and level, the static loss of generalizing that QI to that level
    #: (the node's static loss is the sum over QIs), so that the helper's search prunes by bound
    #: and skips checks exactly as the centralized search does (`static_bounds`, `static_loss`)
    static_table: list[list[float]] | None = None
    #: the table is also the metric's monotone lower bound (`Metric.static_bound`)
    static_bounds: bool = False
    #: a node sent in full after its screening sum leaves out the classes whose padded size is
    #: below the implied size: they fail every model whatever their true size, and the
    #: screening sum already told their real rows (`EncryptedCountChecker.full_request`)
    omit_small: bool = False
    #: the public key (hex) under which the key holder sends its suppression queries, where it is
    #: not the counter key: a fresh ElGamal key when the counters are Paillier (`CountJudge.query_key`)
    query_key: str | None = None


def _array(parts: dict[str, bytes], name: str, dtype: str, what: str) -> np.ndarray:
    return np.frombuffer(codec.require_part(parts, name, what), dtype=np.dtype(dtype).newbyteorder("<"))


def _is_evaluation(answer: bytes) -> bool:
    """A check answer is the final evaluation (JSON) or the key holder's suppression query (a message)."""
    return answer[:1] == b"{" and answer not in (SEND_CLASSES, SEND_OMITTED)


#: The key holder's reply to a screening sum that did not decide the node: send its classes.
SEND_CLASSES = b'{"send": "classes"}'
#: The key holder's reply to a full check that left classes out, where the node suppresses and the
#: suppression query is under another key than the counters: send the left-out classes' sums.
SEND_OMITTED = b'{"send": "omitted"}'
#: Counter schemes whose encryption is cheap enough for the key holder's suppression queries
#: (one ciphertext per class sent); with any other the key holder queries under a fresh key of
#: `QUERY_SCHEME` (`CountJudge.query_key`).
CHEAP_QUERY_SCHEMES = ("elgamal",)
QUERY_SCHEME = "elgamal"
#: The scheme of the screening counters (`screen_counters_wanted`).
SCREEN_SCHEME = "elgamal"


def screen_counters_wanted(config: AnonymizationConfig, scheme: str) -> bool:
    """Whether the key holder publishes a screening key and every row gets a second counter under
    it, which the helper sums for the screening sums (`EncryptedCountChecker.screen_request`).

    Why: with suppression most checks are decided by their screening sum (ADULT, k = 5, 5 %: 498
    of 550), and with Paillier counters each is a product of ~1,000-10,000 sums mod n² at the
    helper and a Paillier decryption at the key holder (about half of the search's CPU); under
    an ElGamal key the same number costs point additions and one table lookup. The second counter
    costs one ElGamal encryption per row (about an eighth of a Paillier one), so it is made only
    where screening sums will be many: a counter scheme without cheap sums, a suppression limit,
    a screened metric and an implied class size. Every party decides this from the run's settings,
    before any data (`implied_class_size` of the unprepared criteria): where that differs from the
    size the key holder's judge derives from the data, a screening key is made but not used, or
    the screening sums stay under the counter key -- both sides use the same key either way.
    """
    return (scheme not in CHEAP_QUERY_SCHEMES and config.suppression > 0 and config.metric in SCREENED_METRICS
            and implied_class_size(build_criteria(config)) > 1)


# ----------------------------------------------------------------------------- helper side


class EncryptedCountChecker(Checker):
    """The helper's checker: groups ciphertext rows, sums encrypted counters, asks the key holder."""

    def __init__(self, structure: Structure, key: CounterPublicKey, counters: RowCounters,
                 ask: Callable[[bytes], bytes], screen_key: CounterPublicKey | None = None) -> None:
        self.structure = structure
        self.grouper = structure.grouper
        self.key = key
        self.counters = counters
        self.ask = ask
        self.config = structure.config
        self.attributes = sorted(self.grouper.sensitive_codes)
        self.weights = self.config.metric == "loss"
        # a model judged on the classes' QI codes (LKC-privacy): send projection labels per check
        self.labels = any(c.needs_codes for c in build_criteria(self.config))
        self._leaf = metric_context(structure, structure.table.n_rows, []).leaf_fraction if self.weights else []
        self.sums = NodeSums(structure, key, counters.real, counters.subset, self.attributes)
        # screening sums from the screening counters where the rows carry them (`screen_counters_wanted`)
        self.screen_key = screen_key if counters.screen is not None else None
        self.screen_sums = None if self.screen_key is None else \
            NodeSums(structure, self.screen_key, counters.screen, None, [])
        # the last request's classes, order, and (classes left out) the node's sums
        self._asked: tuple[Classes, np.ndarray, Sums | None] | None = None
        # the left-out classes of the last full check, in the order they were sent (`omitted_request`)
        self._omitted: np.ndarray | None = None
        # the key of the key holder's suppression queries (the counter key unless the facts name another)
        self.query_key: CounterPublicKey = key
        self.checks = 0
        self.suppression_rounds = 0
        self.screened = 0  # checks the screening sum decided (no class sums sent)
        self.screen = False
        self.omit_small = False
        self._static: list[np.ndarray] | None = None
        self._static_bounds = False
        self.messages_bytes = 0

    # -- setup: totals for the key holder's statistics --------------------------------
    def setup_request(self) -> bytes:
        """Encrypted totals (one 'class' holding every row) + structure facts the judge needs."""
        top = tuple(int(h) - 1 for h in self.structure.lattice.heights)
        n = self.structure.table.n_rows
        entropy = self.config.metric in ENTROPY_METRICS
        # entropy metrics need the bottom's sums for the leaf marginals: the totals roll up from them too
        parts = self.sums.bottom_total() if entropy else self.sums.from_rows(np.zeros(n, dtype=np.int64), 1)
        control = {"heights": list(self.structure.lattice.heights), "metric": self.config.metric,
                   "sensitive": {a: int(self.grouper.sensitive_sizes[a]) for a in self.attributes},
                   "top": list(top)}
        message = {name: self.key.sums_message(sums, [int(b) for b in bounds]) for name, (sums, bounds) in parts.items()}
        for attr, cmap in self.structure.sensitive_code_maps.items():
            message[f"map/{attr}"] = np.ascontiguousarray(cmap, dtype="<i4").tobytes()
            control.setdefault("map_shapes", {})[attr] = list(cmap.shape)
        if entropy:
            control["leaves"] = self._leaf_marginals(message)
            control["level_sizes"] = [[len(d) for d in dicts] for dicts in self.structure.level_dicts]
        return codec.pack_message({"control": json.dumps(control).encode(), **message})

    def _leaf_marginals(self, message: dict[str, bytes]) -> list[int]:
        """Per QI: encrypted real rows per leaf value in a fresh order, and per level which of
        those leaves share a generalized value (labels drawn at random). Returns leaves per QI."""
        leaves = [int(cm.shape[1]) for cm in self.structure.code_maps]
        marginals = self.sums.leaf_marginals(leaves)
        for i, cm in enumerate(self.structure.code_maps):
            height, d0 = int(cm.shape[0]), int(cm.shape[1])
            col = np.asarray(self.grouper.qi_column(i), dtype=np.int64)
            order = random_permutation(d0)  # position p holds leaf order[p]
            sums = marginals[i]
            message[f"leaves/{i}"] = self.key.sums_message(sums, np.bincount(col, minlength=d0).tolist(),
                                                           order.tolist())
            groups = np.empty((height, d0), dtype="<i4")
            for level in range(height):
                relabel = random_permutation(len(self.structure.level_dicts[i][level]))
                groups[level] = relabel[np.asarray(cm[level], dtype=np.int64)[order]]
            message[f"groups/{i}"] = groups.tobytes()
        return leaves

    def adopt(self, facts: JudgeFacts) -> None:
        self.suppression_limit = facts.suppression_limit
        self.anonymity_monotone = facts.anonymity_monotone
        self.strict_monotone = facts.strict_monotone
        self.metric_monotone = facts.metric_monotone
        self.implied_k = facts.implied_k
        self.screen = bool(facts.screen) and facts.implied_k > 1
        self.omit_small = self.screen and bool(facts.omit_small)
        table = facts.static_table
        heights = [int(h) for h in self.structure.lattice.heights]
        if table is not None and (len(table) != len(heights) or any(len(t) != h for t, h in zip(table, heights))):
            raise ProtocolError("the key holder's static loss table does not match the lattice")
        self._static = None if table is None else [np.asarray(t, dtype=np.float64) for t in table]
        self._static_bounds = bool(facts.static_bounds) and table is not None
        if facts.query_key is not None:
            try:
                self.query_key = counter_public_key_from_bytes(bytes.fromhex(facts.query_key))
            except (ValueError, KeyFormatError):
                raise ProtocolError("malformed suppression-query key from the key holder") from None

    def static_bounds(self, levels: np.ndarray) -> np.ndarray | None:
        """The metric's static lower bound of many nodes, summed as `Metric.static_bound` sums it
        (same order, same floats: the search prunes exactly as the centralized one)."""
        if self._static is None or not self._static_bounds:
            return None
        levels = np.atleast_2d(levels)
        out = np.zeros(levels.shape[0], dtype=np.float64)
        for i, t in enumerate(self._static):
            out += t[levels[:, i]]
        return out

    def static_loss(self, levels: tuple[int, ...]) -> float | None:
        """A node's loss where no row is suppressed, as `Metric.static_loss` computes it."""
        if self._static is None:
            return None
        return math.fsum(float(self._static[i][int(l)]) for i, l in enumerate(levels))

    @property
    def rollups(self) -> int:  # type: ignore[override]
        return self.grouper.rollups

    @property
    def row_sums(self) -> int:
        """Nodes whose sums came from the row counters (the rest were rolled up)."""
        return self.sums.row_sums

    def close(self) -> None:
        """Free what the checker shares beyond memory (the bottom node's sums); idempotent."""
        self.sums.close()
        if self.screen_sums is not None:
            self.screen_sums.close()

    def _node_sums(self, levels: tuple[int, ...]) -> tuple[Classes, Sums]:
        classes, rolled = self.grouper.classes(levels, keep_rows=True)
        return classes, self.sums.node(classes, rolled)

    # -- the check -------------------------------------------------------------------------
    def request(self, levels: tuple[int, ...]) -> bytes:
        """The key holder's view of one node: permuted encrypted sums (+ loss weights)."""
        levels = tuple(int(x) for x in levels)
        classes, sums = self._node_sums(levels)
        return self._classes_request(levels, classes, sums)

    def screen_request(self, levels: tuple[int, ...], classes: Classes) -> bytes:
        """One encrypted number for the key holder: the real rows in the classes whose size
        *with* pseudotuples is below the implied class size `implied_k`.

        Those classes are at least as small without their pseudotuples, so every real row in
        them lies in a class below the implied size: the number is a lower bound of the rows
        the engine's implied-size test counts. Where it exceeds the suppression limit the
        node is not anonymous whatever the other classes hold, and the key holder answers
        from this one decryption (on ADULT, k = 5 with 5 % suppression, 498 of 550 checks)
        instead of decrypting every class of a node near the lattice's bottom; the helper
        then needs no sums of the node's classes either (`NodeSums.selected_sum`).
        """
        small = np.asarray(classes.stats.sizes, dtype=np.int64) < self.implied_k
        sums, key = (self.sums, self.key) if self.screen_sums is None else (self.screen_sums, self.screen_key)
        total, bound, complement = sums.selected_sum(classes, small, threshold=self.implied_k)
        control = {"levels": list(levels), "screen": True, "complement": complement}
        return codec.pack_message({"control": json.dumps(control).encode(),
                                   "small": key.sums_message(total, [bound])})  # type: ignore[union-attr]

    def _classes_request(self, levels: tuple[int, ...], classes: Classes, sums: Sums,
                         sent: np.ndarray | None = None) -> bytes:
        """The node's classes (`sent`: only these class indices), permuted, with their sums."""
        n = classes.count
        if sent is None:
            perm = random_permutation(n)  # position p of the message holds class perm[p]
        else:
            perm = np.asarray(sent, dtype=np.int64)[random_permutation(len(sent))]
            n = int(perm.size)
        message: dict[str, bytes] = {}
        for name, (s, bounds) in sums.items():
            if name.startswith("hist/"):
                d = self.grouper.sensitive_sizes[name.split("/", 1)[1]]
                order = (perm[:, None] * d + np.arange(d)).ravel().tolist()
            else:
                order = perm.tolist()
            message[name] = self.key.sums_message(s, [int(b) for b in bounds], order)
        if self.weights:  # per class and QI: share of the hierarchy's leaves under its value (LM)
            w = np.empty((n, len(levels)), dtype="<f8")
            for i, l in enumerate(levels):
                w[:, i] = self._leaf[i][l][classes.codes[:, i]]
            message["weights"] = w[perm].tobytes()
        if self.labels:
            sizes = [len(self.structure.level_dicts[i][l]) for i, l in enumerate(levels)]
            message["labels"] = projection_labels(classes.codes, sizes, perm)
        control = {"levels": list(levels), "classes": n}
        if sent is not None:
            control["omitted"] = True
        self._asked = (classes, perm, None if sent is None else sums)
        self._omitted = None
        return codec.pack_message({"control": json.dumps(control).encode(), **message})

    def full_request(self, levels: tuple[int, ...], classes: Classes, sums: Sums) -> bytes:
        """A node the screening sum did not decide: its classes of padded size at least the
        implied size only (`JudgeFacts.omit_small`). The others hold fewer real rows than the
        implied size, so every model rejects them; the key holder knows their real rows from
        the screening sum, and a suppression query gets their real rows per generalized value
        from the helper's own sums (`marginals_request`). Near the lattice's bottom that is
        about half of a node's classes: half the key holder's decryptions and encryptions."""
        sent = np.flatnonzero(np.asarray(classes.stats.sizes, dtype=np.int64) >= self.implied_k)
        return self._classes_request(levels, classes, sums, sent if sent.size else None)

    def _small_sums(self, classes: Classes, sums: Sums, small: np.ndarray) -> list[bytes]:
        """The encrypted real rows of each class in `small` (class indices), as ciphertexts."""
        name = "sizes" if "sizes" in sums else next(n for n in sums if n.startswith("hist/"))
        values = sums[name][0]
        if name == "sizes":  # a class's own sum: picked, not multiplied (no bin for the others)
            picked = self.key.ciphertexts(values)
            return [picked[int(c)] for c in small]
        rank = np.full(classes.count, small.size, dtype=np.int64)  # the last bin collects the others
        rank[small] = np.arange(small.size)
        if name.startswith("hist/"):  # a class's real rows: the sum of its cells
            rank = np.repeat(rank, self.grouper.sensitive_sizes[name.split("/", 1)[1]])
        return self.key.ciphertexts(self.key.sum_by_class(values, rank.tolist(), small.size + 1))[:small.size]

    def omitted_request(self) -> bytes:
        """The encrypted real rows of each class the last full check left out, in a fresh order.

        The key holder asks for them (`SEND_OMITTED`) where that node suppresses rows and its
        suppression query is under another key than the counters (Paillier counters: an
        ElGamal query, ~8x cheaper to encrypt per class): the helper cannot add its own
        Paillier sums of the left-out classes to ElGamal ones, so the key holder puts those
        classes into its query too. It learns their sizes, as a full check with every class
        told it; their rows in all it knew from the screening sum.
        """
        if self._asked is None or self._asked[2] is None or self._omitted is not None:
            raise ProtocolError("the key holder asks for left-out classes, but the last check left none out")
        classes, perm, sums = self._asked
        small = np.setdiff1d(np.arange(classes.count), perm)
        order = small[random_permutation(small.size)]
        self._omitted = order
        message: dict[str, bytes] = {"control": json.dumps({"omitted_classes": int(order.size)}).encode()}
        if order.size:
            bounds = np.asarray(classes.stats.sizes, dtype=np.int64)[order]
            message["omitted"] = self.key.sums_message(self.key.load(self._small_sums(classes, sums, order)),  # type: ignore[arg-type]
                                                       bounds.tolist())
        return codec.pack_message(message)

    def marginals_request(self, query: bytes) -> bytes:
        """Answer the key holder's suppression query for the node just asked about.

        The query holds, per class in the order the helper sent (then the left-out classes in
        the order of `omitted_request`, if asked for), Enc(true size) for a class the key
        holder suppresses and Enc(0) otherwise, under the query key (`JudgeFacts.query_key`).
        The helper puts them back in class order, sums them per (QI, generalized value) and
        sends each QI's sums in a fresh order: per-QI counts of suppressed rows, with no value
        attached.
        """
        if self._asked is None:
            raise ProtocolError("suppression query from the key holder without a pending check")
        classes, perm, sums = self._asked
        parts = codec.unpack_message(query, "suppression query")
        control = json.loads(codec.require_part(parts, "control", "suppression query"))
        queried = perm if self._omitted is None else np.concatenate([perm, self._omitted])
        n = int(queried.size)
        blob = codec.require_part(parts, "rows", "suppression query")
        if control.get("suppressed_query") != n or n == 0 or len(blob) % n:
            raise ProtocolError("malformed suppression query from the key holder")
        width = len(blob) // n
        by_class = [b""] * classes.count
        for position, c in enumerate(queried.tolist()):
            by_class[c] = blob[position * width:(position + 1) * width]
        if sums is not None and self._omitted is None:  # the classes left out are all suppressed: their rows, summed here
            if self.query_key is not self.key:
                raise ProtocolError("suppression query under its own key, but the left-out classes were not asked for")
            small = np.setdiff1d(np.arange(classes.count), perm)
            for c, ciphertext in zip(small.tolist(), self._small_sums(classes, sums, small)):
                by_class[c] = ciphertext
        helper_sizes = np.asarray(classes.stats.sizes, dtype=np.int64)  # pseudotuples included: a bound
        message: dict[str, bytes] = {}
        sizes = [len(self.structure.level_dicts[i][level]) for i, level in enumerate(classes.levels)]
        codes = [np.asarray(classes.codes[:, i], dtype=np.int64) for i in range(len(sizes))]
        all_sums = self.query_key.grouped_sums(by_class, list(zip(codes, sizes)), workers=None)
        for i, (d, sums) in enumerate(zip(sizes, all_sums)):
            bounds = np.bincount(codes[i], weights=helper_sizes, minlength=d).astype(np.int64)
            message[f"marginal/{i}"] = self.query_key.sums_message(sums, bounds.tolist(),
                                                                   random_permutation(d).tolist())
        self.suppression_rounds += 1
        return codec.pack_message({"control": json.dumps({"marginals": sizes}).encode(), **message})

    def evaluate(self, levels: tuple[int, ...]) -> NodeEvaluation:
        self.checks += 1
        levels = tuple(int(x) for x in levels)
        if self.screen:
            classes, rolled = self.grouper.classes(levels, keep_rows=True)
            answer = self.ask(self.screen_request(levels, classes))
            if _is_evaluation(answer):
                self.screened += 1
                return evaluation_from_bytes(answer)
            if answer != SEND_CLASSES:
                raise ProtocolError("unexpected answer of the key holder to a screening sum")
            sums = self.sums.node(classes, rolled)
            if self.omit_small:
                answer = self.ask(self.full_request(levels, classes, sums))
                if answer == SEND_OMITTED:
                    answer = self.ask(self.omitted_request())
                if not _is_evaluation(answer):
                    answer = self.ask(self.marginals_request(answer))
                return evaluation_from_bytes(answer)
        else:
            classes, sums = self._node_sums(levels)
        answer = self.ask(self._classes_request(levels, classes, sums))
        if not _is_evaluation(answer):
            answer = self.ask(self.marginals_request(answer))
        return evaluation_from_bytes(answer)


def evaluation_to_bytes(ev: NodeEvaluation) -> bytes:
    fields = {k: v for k, v in asdict(ev).items() if k in _ANSWER_FIELDS}
    return json.dumps(fields).encode()


_ANSWER_FIELDS = ("anonymous", "anonymous_strict", "implied_k_ok", "loss", "bound")


def evaluation_from_bytes(blob: bytes) -> NodeEvaluation:
    try:
        data = json.loads(blob.decode())
        return NodeEvaluation(anonymous=bool(data["anonymous"]), anonymous_strict=bool(data["anonymous_strict"]),
                              suppressed_rows=0, classes=0, loss=float(data["loss"]), bound=float(data["bound"]),
                              implied_k_ok=bool(data["implied_k_ok"]))
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        raise ProtocolError("corrupt check answer from the key holder") from None


# ----------------------------------------------------------------------------- key holder side


class CountJudge:
    """The key holder: decrypts class sums in permuted order and judges with the engine."""

    def __init__(self, key: CounterPrivateKey, config: AnonymizationConfig, setup: bytes,
                 workers: int | None = 1, screen_key: CounterPrivateKey | None = None) -> None:
        check_supported(config)
        self.key = key
        self.screen_key = screen_key  # the screening sums come under it (`screen_counters_wanted`)
        self.config = config
        self.workers = workers
        parts = codec.unpack_message(setup, "check setup")
        control = json.loads(codec.require_part(parts, "control", "check setup"))
        self.heights = [int(h) for h in control["heights"]]
        self.sensitive = {str(a): int(d) for a, d in control["sensitive"].items()}
        stats = self._stats(parts, 1)
        n_rows = int(stats.sizes[0])
        if n_rows <= 0:
            raise ProtocolError("the integrated table holds no real rows")
        maps = {a: _array(parts, f"map/{a}", "i4", "check setup").reshape(control["map_shapes"][a])
                for a in control.get("map_shapes", {})}
        context = CriterionContext(
            n_rows=n_rows,
            histograms_total={a: h[0] for a, h in stats.histograms.items()},
            sensitive_code_maps=maps,
            subset_total=None if stats.subset_sizes is None else int(stats.subset_sizes[0]),
        )
        self.n_rows = n_rows
        criteria, self.labelled = label_criteria(build_criteria(config))
        self.metric_kind = config.metric
        self.level_sizes: list[list[int]] = []
        metric_context = self._entropy_context(parts, control) if config.metric in ENTROPY_METRICS else \
            self._metric_context(None, None)
        self.judge = ClassJudge(criteria, build_metric(config.metric, metric_context, config.metric_weights()),
                                config.suppression, context)
        self.marginal_rounds = config.metric in SUPPRESSION_MARGINAL_METRICS and self.judge.suppression_limit > 0
        self.screen = config.metric in SCREENED_METRICS and self.judge.implied_k > 1
        # classes below the implied size may be left out of a full check where each class is judged
        # on its own (no release-level criterion): they fail whatever the others hold
        self.omit_small = self.screen and not any(c.release_level for c in criteria)
        # suppression queries (one ciphertext per class, encrypted here): under the counter key
        # where its encryption is cheap (ElGamal), else under a fresh ElGamal key of this party's
        # own -- a Paillier-3072 encryption costs ~8 ElGamal ones (0.42 ms against 0.05 ms, the key
        # holder's CRT and fixed-base paths both), and a query has one per class
        self.query_key = key if key.scheme in CHEAP_QUERY_SCHEMES or not self.marginal_rounds \
            else generate_counter_key(QUERY_SCHEME)
        self._pending: tuple[tuple[int, ...], NodeEvaluation] | None = None
        # a node that suppresses, waiting for its left-out classes (`SEND_OMITTED`)
        self._awaiting: tuple[tuple[int, ...], Classes, np.ndarray, np.ndarray, NodeEvaluation, int] | None = None
        self._screened: tuple[int, ...] | None = None  # a node whose screening sum did not decide it
        self._screened_small = 0  # its real rows in classes of padded size below the implied size
        self.checks = 0
        self.screened = 0

    def _entropy_context(self, parts: dict[str, bytes], control: dict) -> MetricContext:
        """The engine's metric context in the helper's permuted leaf order, from decrypted leaf counts.

        Leaves without a real row (values only pseudotuples carry) are dropped: the
        centralized table has no such value. Entropy sums run over values, so the order
        does not change them.
        """
        leaves, level_sizes = control.get("leaves"), control.get("level_sizes")
        if not isinstance(leaves, list) or not isinstance(level_sizes, list) or \
                not len(leaves) == len(level_sizes) == len(self.heights):
            raise ProtocolError("check setup lacks the per-QI leaf counts the entropy metric needs")
        cards, maps = [], []
        for i, (height, d0) in enumerate(zip(self.heights, leaves)):
            if not isinstance(d0, int) or not 0 < d0 <= 1 << 24:
                raise ProtocolError("malformed leaf counts in check setup")
            counts = self._decrypt(parts, f"leaves/{i}", d0)
            groups = _array(parts, f"groups/{i}", "i4", "check setup")
            sizes = level_sizes[i]
            if not isinstance(sizes, list) or len(sizes) != height or \
                    not all(isinstance(d, int) and 0 < d <= d0 for d in sizes) or groups.size != height * d0:
                raise ProtocolError("malformed hierarchy grouping in check setup")
            groups = groups.reshape(height, d0).astype(np.int64)
            if (groups < 0).any() or (groups >= np.asarray(sizes, dtype=np.int64)[:, None]).any():
                raise ProtocolError("malformed hierarchy grouping in check setup")
            if int(counts.sum()) != self.n_rows:
                raise ProtocolError(f"leaf counts of QI #{i} do not add up to the table's real rows")
            self.level_sizes.append(list(sizes))
            keep = counts > 0
            real = counts[keep]
            kept = groups[:, keep].copy()
            kept[0] = np.arange(real.size)
            maps.append(kept)
            # level 0 holds the kept leaves only (a hybrid join can drop every real row of a value
            # that a pseudotuple still carries); higher levels keep the helper's numbering
            cards.append([np.bincount(kept[level], weights=real,
                                      minlength=real.size if level == 0 else self.level_sizes[i][level])
                          .astype(np.int64) for level in range(height)])
        unused = [[np.zeros(1)] * h for h in self.heights]  # leaf shares: LM only
        return MetricContext(self.n_rows, self.heights, cards, maps, unused)

    def facts(self) -> JudgeFacts:
        j = self.judge
        table, bounds = self._static_table()
        query = None if self.query_key is self.key else self.query_key.public_key.to_bytes().hex()
        return JudgeFacts(j.suppression_limit, j.anonymity_monotone, j.strict_monotone, j.metric_monotone,
                          int(j.implied_k), self.screen, table, bounds, self.omit_small, query)

    def _static_table(self) -> tuple[list[list[float]] | None, bool]:
        """Entropy metrics: per QI and level, the static loss of the node with that QI at that
        level and every other at level 0 -- where every other term is 0 (a value generalized
        to itself loses nothing), so the entry is that QI's term exactly, and sums of entries
        are bit-identical to the metric's own (`static_bound` adds the terms in QI order,
        `static_loss` with `math.fsum`)."""
        if self.metric_kind not in ENTROPY_METRICS:
            return None, False
        metric = self.judge.metric
        bottom = [0] * len(self.heights)
        table, bounds = [], True
        for i, height in enumerate(self.heights):
            row = []
            for level in range(height):
                node = list(bottom)
                node[i] = level
                row.append(float(metric.static_loss(tuple(node))))
                bound = metric.static_bound(np.asarray([node], dtype=np.int64))
                bounds = bounds and bound is not None and float(bound[0]) == row[-1]
            table.append(row)
        if any(t[0] != 0.0 for t in table):  # not the additive form assumed above: send nothing
            return None, False
        return table, bounds

    def _metric_context(self, sizes: np.ndarray | None, weights: np.ndarray | None) -> MetricContext:
        """Size-only metrics need n and heights. LM gets a per-check context in which every
        class is its own 'value' whose leaf share is the weight the helper sent (so the
        engine's LM formula sums size x share over classes -- the same total as over rows)."""
        q = len(self.heights)
        if weights is None or sizes is None:
            empty = [[np.zeros(1)] * h for h in self.heights]
            return MetricContext(self.n_rows, self.heights, empty,
                                 [np.zeros((h, 1), dtype=np.int64) for h in self.heights], empty)
        ident = np.arange(len(sizes), dtype=np.int64)
        return MetricContext(
            n_rows=self.n_rows, heights=self.heights,
            cardinalities=[[sizes.astype(np.int64)] * h for h in self.heights],
            level0_to_level=[np.tile(ident, (h, 1)) for h in self.heights],
            leaf_fraction=[[weights[:, i]] * self.heights[i] for i in range(q)],
        )

    def _decrypt(self, parts: dict[str, bytes], name: str, count: int,
                 key: CounterPrivateKey | None = None) -> np.ndarray:
        blob = codec.require_part(parts, name, "check request")
        return np.asarray((key or self.key).decrypt_class_counts(blob, count, workers=self.workers), dtype=np.int64)

    def _stats(self, parts: dict[str, bytes], n: int) -> ClassStats:
        hists = {a: self._decrypt(parts, f"hist/{a}", n * d).reshape(n, d) for a, d in self.sensitive.items()}
        if hists:
            sizes = next(iter(hists.values())).sum(axis=1)
        else:
            sizes = self._decrypt(parts, "sizes", n)
        subset = self._decrypt(parts, "subset", n) if "subset" in parts else None
        return ClassStats(sizes, hists, subset)

    def answer(self, request: bytes) -> bytes:
        """Judge one node; the reply holds only what the search needs (or, for an entropy
        metric at an anonymous node that suppresses, first the suppression query)."""
        parts = codec.unpack_message(request, "check request")
        control = json.loads(codec.require_part(parts, "control", "check request"))
        if "marginals" in control:
            return self._finish(parts, control)
        if "omitted_classes" in control:
            return self._omitted_classes(parts, control)
        if self._pending is not None or self._awaiting is not None:
            raise ProtocolError("check request while a suppression query is open")
        if control.get("screen"):
            return self._screen(parts, control)
        levels = tuple(int(x) for x in control["levels"])
        omitted = bool(control.get("omitted"))
        if omitted and not (self.omit_small and self._screened is not None):
            raise ProtocolError("check request without the classes below the implied size, but no screening "
                                "sum told their rows")
        if self._screened is None:
            self.checks += 1
        elif self._screened != levels:
            raise ProtocolError("check request for another node than the one just screened")
        self._screened = None
        small = self._screened_small if omitted else 0
        n = int(control["classes"])
        if len(levels) != len(self.heights) or not 0 < n <= 1 << 31:
            raise ProtocolError("malformed check request")
        stats = self._stats(parts, n)
        live = stats.sizes > 0  # classes of pseudotuples only do not exist
        true = ClassStats(stats.sizes[live], {a: h[live] for a, h in stats.histograms.items()},
                          None if stats.subset_sizes is None else stats.subset_sizes[live])
        classes = Classes(levels, np.zeros((int(live.sum()), len(levels)), dtype=np.int32), true)
        if self.labelled:
            labels = read_labels(codec.require_part(parts, "labels", "check request"), n, len(levels))[live]
            for criterion in self.labelled:
                criterion.labels = labels
        if self.metric_kind == "loss":
            weights = _array(parts, "weights", "f8", "check request").reshape(n, len(levels))[live]
            classes.codes = np.tile(np.arange(classes.count, dtype=np.int32)[:, None], (1, len(levels)))
            self.judge.metric = build_metric("loss", self._metric_context(true.sizes, weights),
                                             self.config.metric_weights())
        if omitted:
            evaluation, failing = self._judge_with_small(levels, classes, small)
        else:
            evaluation = self.judge.judge(levels, classes)
            failing = None
        if self.marginal_rounds and evaluation.anonymous and evaluation.suppressed_rows > 0:
            if failing is None:
                failing = self.judge.failing_classes(true)
            if omitted and self.query_key is not self.key:  # the left-out classes go into the query too
                self._awaiting = (levels, classes, live, failing, evaluation, small)
                return SEND_OMITTED
            return self._suppression_query(levels, classes, live, failing, evaluation)
        return evaluation_to_bytes(evaluation)

    def _omitted_classes(self, parts: dict[str, bytes], control: dict) -> bytes:
        """The real rows of each class the node's full check left out (`SEND_OMITTED`): all of
        them suppressed, together the screening sum's rows; the query then covers them too."""
        if self._awaiting is None:
            raise ProtocolError("left-out classes from the helper without a request")
        levels, classes, live, failing, evaluation, small = self._awaiting
        self._awaiting = None
        count = control.get("omitted_classes")
        if not isinstance(count, int) or not 0 <= count <= 1 << 31:
            raise ProtocolError("malformed left-out classes from the helper")
        sizes = self._decrypt(parts, "omitted", count) if count else np.zeros(0, dtype=np.int64)
        if int(sizes.sum()) != small or (sizes >= self.judge.implied_k).any():
            raise ProtocolError("the left-out classes do not hold the screening sum's rows")
        return self._suppression_query(levels, classes, live, failing, evaluation, sizes)

    def _judge_with_small(self, levels: tuple[int, ...], classes: Classes, small: int
                          ) -> tuple[NodeEvaluation, np.ndarray | None]:
        """`ClassJudge.judge` for a node whose classes below the implied size were left out
        (`JudgeFacts.omit_small`): `small` real rows lie in them, all suppressed, and each
        sent class is judged on its own (no release-level criterion). The loss is the static
        one; a metric that charges suppressed rows gets it from the suppression marginals."""
        j = self.judge
        sizes = classes.stats.sizes
        limit = j.suppression_limit
        below = sizes < j.implied_k
        bound = j.metric.class_bound(levels, classes)
        under = small + int(sizes[below].sum())
        if under > limit:
            return NodeEvaluation(implied_k_ok=False, anonymous=False, anonymous_strict=False, suppressed_rows=under,
                                  classes=classes.count - int(below.sum()), loss=math.inf, bound=bound), None
        failing = j.failing_classes(classes.stats, classes.codes, limit)
        suppressed = small + (int(sizes[failing].sum()) if failing.any() else 0)
        anonymous = suppressed <= limit
        return NodeEvaluation(implied_k_ok=True, anonymous=anonymous, anonymous_strict=suppressed == 0,
                              suppressed_rows=suppressed, classes=classes.count - int(failing.sum()),
                              loss=j.metric.static_loss(levels) if anonymous else math.inf, bound=bound), failing

    def _screen(self, parts: dict[str, bytes], control: dict) -> bytes:
        """A screening sum (`EncryptedCountChecker.screen_request`): a lower bound of the rows in
        classes below the implied size. Above the suppression limit it decides the node exactly as
        the engine's implied-size test does (not anonymous; the bound depends on the levels only);
        otherwise the helper is asked for the node's classes."""
        if not self.screen:
            raise ProtocolError("screening sum from the helper although this judge does not screen")
        if self._screened is not None:
            raise ProtocolError("screening sum while another screened node waits for its classes")
        levels = tuple(int(x) for x in control.get("levels", ()))
        if len(levels) != len(self.heights) or any(not 0 <= l < h for l, h in zip(levels, self.heights)):
            raise ProtocolError("malformed screening request")
        self.checks += 1
        small = int(self._decrypt(parts, "small", 1, key=self.screen_key)[0])
        if small > self.n_rows:
            raise ProtocolError("screening sum exceeds the table's real rows")
        if control.get("complement"):  # the rows of the other classes were summed
            small = self.n_rows - small
        if small <= self.judge.suppression_limit:
            self._screened, self._screened_small = levels, small
            return SEND_CLASSES
        self.screened += 1
        empty = Classes(levels, np.zeros((0, len(levels)), dtype=np.int32),
                        ClassStats(np.zeros(0, dtype=np.int64), {}, None))
        return evaluation_to_bytes(NodeEvaluation(
            implied_k_ok=False, anonymous=False, anonymous_strict=False, suppressed_rows=small, classes=0,
            loss=math.inf, bound=self.judge.metric.class_bound(levels, empty)))

    def _suppression_query(self, levels: tuple[int, ...], classes: Classes, live: np.ndarray,
                           failing: np.ndarray, evaluation: NodeEvaluation, omitted: np.ndarray | None = None) -> bytes:
        """Per class in the helper's order: Enc(true size) if suppressed, else Enc(0), freshly
        randomized under the query key -- the helper cannot tell which classes they are. Then,
        if asked for (`omitted`), the left-out classes' sizes: all suppressed."""
        rows = np.zeros(live.shape[0], dtype=np.int64)
        rows[np.flatnonzero(live)[failing]] = classes.stats.sizes[failing]
        if omitted is not None:
            rows = np.concatenate([rows, omitted])
        self._pending = (levels, evaluation)
        blob = b"".join(self.query_key.encrypt_values(rows.tolist(), workers=self.workers))
        control = {"suppressed_query": int(rows.size)}
        return codec.pack_message({"control": json.dumps(control).encode(), "rows": blob})

    def _finish(self, parts: dict[str, bytes], control: dict) -> bytes:
        """The per-QI counts of suppressed rows are in: the engine's loss, exactly."""
        if self._pending is None:
            raise ProtocolError("suppression marginals from the helper without a query")
        levels, evaluation = self._pending
        suppressed = evaluation.suppressed_rows
        self._pending = None
        sizes = control["marginals"]
        expected = [self.level_sizes[i][level] for i, level in enumerate(levels)]
        if sizes != expected:
            raise ProtocolError("suppression marginals do not match the node's generalized values")
        marginals = [self._decrypt(parts, f"marginal/{i}", d, self.query_key) for i, d in enumerate(sizes)]
        if any(int(m.sum()) != suppressed for m in marginals):
            raise ProtocolError("suppression marginals do not add up to the suppressed rows")
        # ClassJudge would charge suppression by class codes, which this party never sees;
        # the same formula over the per-QI counts gives the engine's value
        metric = self.judge.metric
        evaluation.loss = metric.static_loss(levels) + metric.suppressed_loss(marginals)  # type: ignore[attr-defined]
        return evaluation_to_bytes(evaluation)

    def failing_rows(self, qi_codes: np.ndarray, sensitive: dict[str, np.ndarray],
                     subset: np.ndarray | None) -> tuple[np.ndarray, int]:
        """At the end, on the real rows only: which rows fall into classes that must be
        suppressed, and how many classes are kept (the engine's `classes`)."""
        if qi_codes.shape[0] == 0:
            return np.zeros(0, dtype=bool), 0
        cols = [np.ascontiguousarray(qi_codes[:, i]) for i in range(qi_codes.shape[1])]
        first, inverse = group_keys(cols, [int(c.max()) + 1 for c in cols])
        n = first.shape[0]
        hists = {a: np.bincount(inverse * d + sensitive[a], minlength=n * d).reshape(n, d)
                 for a, d in self.sensitive.items()}
        sub = None if subset is None else np.bincount(inverse, weights=subset.astype(np.int64), minlength=n).astype(np.int64)
        stats = ClassStats(np.bincount(inverse, minlength=n).astype(np.int64), hists, sub)
        for criterion in self.labelled:  # the true codes, now that the key holder has the rows
            criterion.labels = np.asarray(qi_codes, dtype=np.int64)[first]
        failing = self.judge.failing_classes(stats)
        suppressed = failing[inverse]
        if int(suppressed.sum()) > self.judge.suppression_limit:
            raise ProtocolError("the helper's final transformation is not anonymous on the true rows")
        return suppressed, int(n - failing.sum())

