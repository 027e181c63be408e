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

What each side learns is listed in README's threat model (Protocol C subsection); in
short: the helper never sees a count, only the verdicts, losses and bounds of the nodes
it tests (plus, once, the suppression limit and implied class size). The key holder sees
true class sizes (and sensitive histograms / subset counts where a model needs them) of
each tested node in an order it cannot link to class contents, never a cell.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from fedanon.crypto.counters import CounterPrivateKey, CounterPublicKey
from fedanon.engine.anonymizer import Structure, metric_context
from fedanon.engine.checker import Checker, ClassJudge, NodeEvaluation
from fedanon.engine.config import AnonymizationConfig
from fedanon.engine.criteria import ClassStats, CriterionContext, build_criteria
from fedanon.engine.grouping import Classes, group_keys
from fedanon.engine.metrics import MetricContext, build_metric
from fedanon.errors import InputError, ProtocolError
from fedanon.protocols import codec
from fedanon.protocols.cellcrypt import random_permutation
from fedanon.protocols.registry import protocol_spec

#: Metrics Protocol C can evaluate without showing anyone a QI value distribution (declared
#: in its registry spec). The entropy metrics need every row's value frequency per QI (a
#: per-QI distribution); the key holder could only compute them if it learned those.
COUNTED_METRICS: tuple[str, ...] = protocol_spec("C").metrics or ()

# How many nodes' encrypted sums the helper keeps for roll-up (bounded like the grouper's history).
_SUM_CACHE_NODES = 256


def check_supported(config: AnonymizationConfig) -> None:
    """Refuse, before any data moves, what Protocol C cannot check privately."""
    if config.metric not in COUNTED_METRICS:
        raise InputError(
            f"Protocol C does not support metric {config.metric!r}: it needs the per-QI value "
            f"distribution, which C hides from every party; choose one of {', '.join(COUNTED_METRICS)}")


@dataclass
class RowCounters:
    """The helper's loaded counter columns, in the integrated table's row order."""

    real: object  # Enc(1) real row, Enc(0) pseudotuple
    subset: object | None = None  # Enc(1) real research-subset row, else Enc(0) (delta-presence)


@dataclass
class JudgeFacts:
    """What the key holder tells the helper once: the flags the search needs."""

    suppression_limit: int
    anonymity_monotone: bool
    strict_monotone: bool
    metric_monotone: bool
    implied_k: int


def _array(parts: dict[str, bytes], name: str, dtype: str, what: str) -> np.ndarray:
    return np.frombuffer(codec.require_part(parts, name, what), dtype=np.dtype(dtype).newbyteorder("<"))


# ----------------------------------------------------------------------------- helper side


class EncryptedCountChecker(Checker):
    """The helper's checker: groups ciphertext rows, sums encrypted counters, asks the key holder."""

    def __init__(self, structure: Structure, key: CounterPublicKey, counters: RowCounters,
                 ask: Callable[[bytes], bytes]) -> None:
        self.structure = structure
        self.grouper = structure.grouper
        self.key = key
        self.counters = counters
        self.ask = ask
        self.config = structure.config
        self.attributes = sorted(self.grouper.sensitive_codes)
        self.weights = self.config.metric == "loss"
        self._leaf = metric_context(structure, structure.table.n_rows, []).leaf_fraction if self.weights else []
        self._sums: "OrderedDict[tuple[int, ...], dict[str, tuple[object, np.ndarray]]]" = OrderedDict()
        self.checks = 0
        self.messages_bytes = 0

    # -- setup: totals for the key holder's statistics --------------------------------
    def setup_request(self) -> bytes:
        """Encrypted totals (one 'class' holding every row) + structure facts the judge needs."""
        top = tuple(int(h) - 1 for h in self.structure.lattice.heights)
        n = self.structure.table.n_rows
        ids = np.zeros(n, dtype=np.int64)
        parts = self._row_sums(ids, 1, self._cells(ids, 1))
        control = {"heights": list(self.structure.lattice.heights), "metric": self.config.metric,
                   "sensitive": {a: int(self.grouper.sensitive_sizes[a]) for a in self.attributes},
                   "top": list(top)}
        message = {name: self.key.sums_message(sums, [int(b) for b in bounds]) for name, (sums, bounds) in parts.items()}
        for attr, cmap in self.structure.sensitive_code_maps.items():
            message[f"map/{attr}"] = np.ascontiguousarray(cmap, dtype="<i4").tobytes()
            control.setdefault("map_shapes", {})[attr] = list(cmap.shape)
        return codec.pack_message({"control": json.dumps(control).encode(), **message})

    def adopt(self, facts: JudgeFacts) -> None:
        self.suppression_limit = facts.suppression_limit
        self.anonymity_monotone = facts.anonymity_monotone
        self.strict_monotone = facts.strict_monotone
        self.metric_monotone = facts.metric_monotone
        self.implied_k = facts.implied_k

    @property
    def rollups(self) -> int:  # type: ignore[override]
        return self.grouper.rollups

    # -- sums ----------------------------------------------------------------------------
    def _cells(self, row_class: np.ndarray, n_classes: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per sensitive attribute: (cell id per row, helper-side rows per cell)."""
        out = {}
        for attr in self.attributes:
            d = self.grouper.sensitive_sizes[attr]
            ids = row_class * d + self.grouper.sensitive_codes[attr]
            out[attr] = (ids, np.bincount(ids, minlength=n_classes * d))
        return out

    def _row_sums(self, row_class: np.ndarray, n_classes: int,
                  cells: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, tuple[object, np.ndarray]]:
        """Encrypted sums from the row counters: name -> (sums, helper-side upper bounds)."""
        out: dict[str, tuple[object, np.ndarray]] = {}
        sizes = np.bincount(row_class, minlength=n_classes)
        ids = row_class.tolist()
        if not self.attributes:
            out["sizes"] = (self.key.sum_by_class(self.counters.real, ids, n_classes), sizes)
        for attr, (cell_ids, bounds) in cells.items():
            out[f"hist/{attr}"] = (self.key.sum_by_class(self.counters.real, cell_ids.tolist(), len(bounds)), bounds)
        if self.counters.subset is not None:
            out["subset"] = (self.key.sum_by_class(self.counters.subset, ids, n_classes), sizes)
        return out

    def _rolled_sums(self, classes: Classes, base: dict[str, tuple[object, np.ndarray]]
                     ) -> dict[str, tuple[object, np.ndarray]]:
        """Encrypted sums of a coarser node from a finer node's sums and the class mapping.

        The upper bounds (helper-side rows per sum, pseudotuples included) roll up alongside.
        """
        mapping = np.asarray(classes.mapping, dtype=np.int64)
        n = classes.count
        out: dict[str, tuple[object, np.ndarray]] = {}
        for name, (sums, bounds) in base.items():
            if name.startswith("hist/"):
                d = self.grouper.sensitive_sizes[name.split("/", 1)[1]]
                ids = (mapping[:, None] * d + np.arange(d, dtype=np.int64)).ravel()
                size = n * d
            else:
                ids, size = mapping, n
            out[name] = (self.key.sum_by_class(sums, ids.tolist(), size),
                         np.bincount(ids, weights=bounds, minlength=size).astype(np.int64))
        return out

    def _node_sums(self, levels: tuple[int, ...]) -> tuple[Classes, dict[str, tuple[object, np.ndarray]]]:
        classes, rolled = self.grouper.classes(levels, keep_rows=True)
        base = self._sums.get(classes.rolled_from) if classes.rolled_from is not None else None
        if rolled and base is not None and classes.mapping is not None:
            sums = self._rolled_sums(classes, base)
        else:
            row_class = classes.row_class
            if row_class is None:  # a stored snapshot without our sums: group the rows once more
                row_class = self.grouper.group_rows(levels, keep_rows=True).row_class
            sums = self._row_sums(np.asarray(row_class, dtype=np.int64), classes.count,
                                  self._cells(np.asarray(row_class, dtype=np.int64), classes.count))
        if self.grouper.remembers(levels):
            self._sums[levels] = sums
            while len(self._sums) > _SUM_CACHE_NODES:
                self._sums.popitem(last=False)
        return classes, sums

    # -- the check -------------------------------------------------------------------------
    def request(self, levels: tuple[int, ...]) -> bytes:
        """The key holder's view of one node: permuted encrypted sums (+ loss weights)."""
        levels = tuple(int(x) for x in levels)
        classes, sums = self._node_sums(levels)
        n = classes.count
        perm = random_permutation(n)  # position p of the message holds class perm[p]
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
        control = {"levels": list(levels), "classes": n}
        return codec.pack_message({"control": json.dumps(control).encode(), **message})

    def evaluate(self, levels: tuple[int, ...]) -> NodeEvaluation:
        self.checks += 1
        answer = self.ask(self.request(levels))
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
                 workers: int | None = 1) -> None:
        check_supported(config)
        self.key = key
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
        criteria = build_criteria(config)
        self.metric_kind = config.metric
        self.judge = ClassJudge(criteria, build_metric(config.metric, self._metric_context(None, None)),
                                config.suppression, context)
        self.checks = 0

    def facts(self) -> JudgeFacts:
        j = self.judge
        return JudgeFacts(j.suppression_limit, j.anonymity_monotone, j.strict_monotone, j.metric_monotone,
                          int(j.implied_k))

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

    def _decrypt(self, parts: dict[str, bytes], name: str, count: int) -> np.ndarray:
        blob = codec.require_part(parts, name, "check request")
        return np.asarray(self.key.decrypt_class_counts(blob, count, workers=self.workers), dtype=np.int64)

    def _stats(self, parts: dict[str, bytes], n: int) -> ClassStats:
        hists = {a: self._decrypt(parts, f"hist/{a}", n * d).reshape(n, d) for a, d in self.sensitive.items()}
        if hists:
            sizes = next(iter(hists.values())).sum(axis=1)
        else:
            sizes = self._decrypt(parts, "sizes", n)
        subset = self._decrypt(parts, "subset", n) if "subset" in parts else None
        return ClassStats(sizes, hists, subset)

    def answer(self, request: bytes) -> bytes:
        """Judge one node; the reply holds only what the search needs."""
        self.checks += 1
        parts = codec.unpack_message(request, "check request")
        control = json.loads(codec.require_part(parts, "control", "check request"))
        levels = tuple(int(x) for x in control["levels"])
        n = int(control["classes"])
        if len(levels) != len(self.heights) or not 0 < n <= 1 << 31:
            raise ProtocolError("malformed check request")
        stats = self._stats(parts, n)
        live = stats.sizes > 0  # classes of pseudotuples only do not exist
        true = ClassStats(stats.sizes[live], {a: h[live] for a, h in stats.histograms.items()},
                          None if stats.subset_sizes is None else stats.subset_sizes[live])
        classes = Classes(levels, np.zeros((int(live.sum()), len(levels)), dtype=np.int32), true)
        if self.metric_kind == "loss":
            weights = _array(parts, "weights", "f8", "check request").reshape(n, len(levels))[live]
            classes.codes = np.tile(np.arange(classes.count, dtype=np.int32)[:, None], (1, len(levels)))
            self.judge.metric = build_metric("loss", self._metric_context(true.sizes, weights))
        return evaluation_to_bytes(self.judge.judge(levels, classes))

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
        failing = self.judge.failing_classes(stats)
        suppressed = failing[inverse]
        if int(suppressed.sum()) > self.judge.suppression_limit:
            raise ProtocolError("the helper's final transformation is not anonymous on the true rows")
        return suppressed, int(n - failing.sum())

