"""Search beyond the node budget: implicit lattice, best-first with a certified bound.

Flash tags every node of a materialized lattice, which stops scaling at a few
million nodes (13 QIs of ADULT: 2.3 M). Above a configurable node budget the search
works on level vectors only and keeps state for the nodes it visits, like ARX's
heuristic mode (which switches above 100,000 nodes):

1. dive: from the bottom, step to the direct generalization closest to anonymity
   (fewest rows in failing classes; first anonymous one with the least loss) -- an
   anonymous solution after at most `sum(max levels)` steps (not cut by the time
   limit, so there always is a verified answer when one exists);
2. descend: while a direct specialization of the best node is anonymous with less
   loss, move there;
3. best-first from the bottom in ascending order of a monotone lower bound of the
   loss (the metric's static bound and the class bound of an evaluated
   predecessor). Every node not yet expanded is a generalization of a node in the
   queue, so the smallest queued bound is a lower bound of the optimum: once it
   exceeds the best loss the best node is the optimum (`optimum_found: true`), and
   when the time limit ends the search first, `loss_lower_bound` and the gap are
   reported with `optimum_found: false`.

Nodes are only pruned by arguments that also hold for the exact search (loss bound
above the best, or a generalization of an anonymous node under a monotone metric),
so without a time limit this returns the same node as Flash, ties included.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from fedanon.engine.check.checker import Checker, NodeEvaluation
from fedanon.engine.search.flash import better, tolerance
from fedanon.engine.search.lattice import Lattice
from fedanon.kit.threads import one_blas_thread

#: lattices with more nodes than this are searched heuristically (ARX: 100,000)
DEFAULT_NODE_BUDGET = 100_000

Levels = tuple[int, ...]


@dataclass(frozen=True)
class SearchLimits:
    """How the search may spend its effort.

    `node_budget`: exact Flash up to this many lattice nodes, the heuristic above.
    `time_limit`: seconds the heuristic may run (None: until the optimum is proven).
    """

    node_budget: int = DEFAULT_NODE_BUDGET
    time_limit: float | None = None


@dataclass
class HeuristicOutcome:
    levels: Levels | None
    evaluation: NodeEvaluation | None
    loss: float
    checks: int
    optimum_found: bool
    loss_lower_bound: float
    expanded: int
    algorithm: str


def stable_key(levels: Levels) -> tuple[int, Levels]:
    """The stable order of §3.8 as a sort key: total level, then the level vector."""
    return (sum(levels), levels)


class HeuristicSearch:
    def __init__(self, lattice: Lattice, checker: Checker, time_limit: float | None = None,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.lattice = lattice
        self.checker = checker
        self.time_limit = time_limit
        self.progress = progress
        self.max_levels = [int(x) for x in lattice.max_levels]
        self.evals: dict[Levels, NodeEvaluation] = {}
        self.best: Levels | None = None
        self.best_loss = math.inf
        self.best_key: tuple[int, Levels] | None = None
        self._anonymous_minimal: list[Levels] = []
        self._anon_matrix: np.ndarray | None = None
        # nodes known not to be anonymous, and whose specializations are not either
        self._failing: list[Levels] = []
        self._failing_matrix: np.ndarray | None = None
        self._deadline = math.inf

    # ------------------------------------------------------------------ helpers
    def _out_of_time(self) -> bool:
        return time.perf_counter() >= self._deadline

    def _evaluate(self, levels: Levels) -> NodeEvaluation:
        ev = self.evals.get(levels)
        if ev is None:
            ev = self.checker.evaluate(levels)
            self.evals[levels] = ev
            if (self.checker.anonymity_monotone and not ev.anonymous) or not ev.implied_k_ok:
                self._failing.append(levels)
                self._failing_matrix = None
            if ev.anonymous:
                key = stable_key(levels)
                if better(ev.loss, key, self.best_loss, self.best_key):  # type: ignore[arg-type]
                    self.best, self.best_loss, self.best_key = levels, ev.loss, key
            if self.progress is not None and len(self.evals) % 64 == 0:
                self.progress(len(self.evals), self.lattice.size)
        return ev

    def _successors(self, levels: Levels) -> list[Levels]:
        return [levels[:i] + (levels[i] + 1,) + levels[i + 1:]
                for i in range(len(levels)) if levels[i] < self.max_levels[i]]

    def _predecessors(self, levels: Levels) -> list[Levels]:
        return [levels[:i] + (levels[i] - 1,) + levels[i + 1:] for i in range(len(levels)) if levels[i] > 0]

    def _static_bounds(self, nodes: list[Levels]) -> np.ndarray:
        sb = self.checker.static_bounds(np.array(nodes, dtype=np.int64))
        return np.full(len(nodes), -math.inf) if sb is None else np.asarray(sb, dtype=np.float64)

    def _dominated(self, levels: Levels) -> bool:
        """A generalization of a known anonymous node (only asked under a monotone metric)."""
        if not self._anonymous_minimal:
            return False
        if self._anon_matrix is None:
            self._anon_matrix = np.array(self._anonymous_minimal, dtype=np.int16)
        return bool((self._anon_matrix <= np.array(levels, dtype=np.int16)).all(axis=1).any())

    def _known_failing(self, levels: Levels) -> bool:
        """A specialization of a node that fails a monotone necessary condition."""
        if not self._failing:
            return False
        if self._failing_matrix is None:
            self._failing_matrix = np.array(self._failing, dtype=np.int16)
        return bool((self._failing_matrix >= np.array(levels, dtype=np.int16)).all(axis=1).any())

    # ------------------------------------------------------------------ phases
    def _dive(self) -> None:
        node: Levels = tuple(0 for _ in self.max_levels)
        ev = self._evaluate(node)
        while not ev.anonymous:  # bounded (<= q x sum of max levels checks), so not timed
            succ = self._successors(node)
            if not succ:
                return
            evs = [self._evaluate(s) for s in succ]
            anonymous = [(e.loss, stable_key(s), s) for s, e in zip(succ, evs) if e.anonymous]
            if anonymous:
                return
            bounds = self._static_bounds(succ)
            node = min(zip(succ, evs, bounds.tolist()), key=lambda t: (t[1].suppressed_rows, t[2], stable_key(t[0])))[0]
            ev = self.evals[node]

    def _descend(self) -> None:
        while self.best is not None and not self._out_of_time():
            before = self.best
            for p in self._predecessors(self.best):
                self._evaluate(p)
                if self._out_of_time():
                    return
            if self.best == before:
                return

    def _best_first(self) -> tuple[bool, float]:
        """Returns (optimum proven, lower bound of the optimum's loss)."""
        monotone_metric = self.checker.metric_monotone
        bottom: Levels = tuple(0 for _ in self.max_levels)
        heap: list[tuple[float, tuple[int, Levels], Levels]] = [
            (float(self._static_bounds([bottom])[0]), stable_key(bottom), bottom)]
        expanded = self._expanded
        while heap:
            bound, _, node = heap[0]
            if self.best is not None and bound > self.best_loss + tolerance(self.best_loss):
                return True, self.best_loss
            if self._out_of_time():
                return False, bound
            heapq.heappop(heap)
            if node in expanded:
                continue
            expanded.add(node)
            if monotone_metric and self._dominated(node):
                continue
            if node in self.evals or not self._known_failing(node):
                ev = self._evaluate(node)
                if ev.anonymous and monotone_metric:
                    self._anonymous_minimal.append(node)
                    self._anon_matrix = None
                    continue
                inherited = max(bound, ev.bound)
            else:
                inherited = bound  # not anonymous, no check needed; its generalizations may be
            succ = [s for s in self._successors(node) if s not in expanded]
            if not succ:
                continue
            for s, b in zip(succ, self._static_bounds(succ).tolist()):
                heapq.heappush(heap, (max(b, inherited), stable_key(s), s))
        return True, self.best_loss

    def run(self) -> HeuristicOutcome:
        with one_blas_thread():
            return self._run()

    def _run(self) -> HeuristicOutcome:
        start = time.perf_counter()
        self._deadline = math.inf if self.time_limit is None else start + self.time_limit
        self._expanded: set[Levels] = set()
        self._dive()
        self._descend()
        proven, lower = self._best_first()
        if self.best is None:
            proven = proven and not self._out_of_time()
        lower = max(0.0, min(lower, self.best_loss)) if math.isfinite(min(lower, self.best_loss)) else 0.0
        if proven and self.best is not None:
            lower = self.best_loss
        return HeuristicOutcome(
            levels=self.best,
            evaluation=None if self.best is None else self.evals[self.best],
            loss=self.best_loss,
            checks=len(self.evals),
            optimum_found=proven,
            loss_lower_bound=lower,
            expanded=len(self._expanded),
            algorithm="best-first with certified bound (beyond the node budget)"
            + ("" if proven else f", stopped by the {self.time_limit:g} s time limit"),
        )
