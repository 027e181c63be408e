"""The Flash search family (§3.7) over a `Checker`.

Phase 1 is Flash_B: greedy depth-first paths up the lattice, each checked by binary
search, with predictive tagging -- generalizations of an anonymous node are
anonymous, specializations of a non-anonymous one are not. Tagging uses the
strongest property that is actually monotone:
  * "anonymous with suppression" when every criterion keeps that property under
    generalization (k-anonymity does, §3.2.1), otherwise
  * "anonymous without suppression" (Flash_2P phase 1); a node tagged that way is
    anonymous with suppression too, but a node failing it may still be anonymous
    by suppressing rows, so it stays a candidate for phase 2.
Phase 2 (only when needed: non-monotone metric or non-monotone criterion, §3.4
cases 2-6) evaluates the remaining candidates, in ascending order of a monotone
lower bound of the loss where the metric has a cheap one (so the bulk is pruned
once the bound exceeds the best loss), otherwise depth-first from the bottom so
each node rolls up from a recently evaluated specialization. The result is the
global optimum; ties go to the earlier node of the stable order (§3.8).

Without suppression, in the fully monotone case, the metric's static bound (known for every
node without grouping) is an anonymous node's loss itself; phase 1 then starts each path at a
node whose loss could still beat the best found (`_phase1_guided`) instead of tracing the whole
border: the same optimum from fewer checks wherever the border lies mostly above the losses
that can win.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from fedanon.engine.check.checker import Checker, NodeEvaluation
from fedanon.engine.search.lattice import Lattice
from fedanon.kit.threads import one_blas_thread

UNKNOWN, YES, NO, PRUNED = 0, 1, 2, 3


def tolerance(x: float) -> float:
    """Absolute slack under which two losses count as equal (float noise of sums)."""
    return 1e-9 * max(1.0, abs(x))


def better(loss: float, rank: int, best_loss: float, best_rank: int) -> bool:
    """Strictly better under (loss, stable order), with float noise treated as a tie."""
    if best_rank is None or best_rank == -1:  # nothing yet (-1: Flash's int ranks)
        return True
    if loss < best_loss - tolerance(best_loss):
        return True
    if loss > best_loss + tolerance(best_loss):
        return False
    return rank < best_rank


@dataclass
class SearchOutcome:
    node: int | None
    evaluation: NodeEvaluation | None
    loss: float
    checks: int
    tagged: int
    algorithm: str
    # True iff this search proves `node` optimal: it evaluated, tagged or bound-pruned every
    # node of the lattice (Flash always does). A search that stops early -- a heuristic, a
    # time limit -- must set it False; the result reports it as `optimum_found`.
    optimum_found: bool = True


class FlashSearch:
    def __init__(
        self,
        lattice: Lattice,
        checker: Checker,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.lattice = lattice
        self.checker = checker
        self.progress = progress
        self.status = np.zeros(lattice.size, dtype=np.int8)
        self._grid = lattice.grid(self.status)  # same memory, indexed by level boxes
        self.evals: dict[int, NodeEvaluation] = {}
        # Which monotone property phase 1 tags with (strongest available first):
        #   "full"     anonymous incl. suppression (k-anonymity, distinct-l, ...)
        #   "implied"  the implied k-anonymity with suppression: necessary, so a node failing it
        #              and all its specializations are out (the dissertation's monotone sub-criterion)
        #   "strict"   anonymous without suppression: sufficient, so a node passing it and all its
        #              generalizations are in
        if checker.anonymity_monotone:
            self.mode = "full"
        elif getattr(checker, "implied_k", 1) > 1 or getattr(checker, "implied_bound", False):
            self.mode = "implied"
        elif checker.strict_monotone:
            self.mode = "strict"
        else:
            self.mode = "none"
        self.use_full = self.mode == "full"
        self.tagging = self.mode != "none"
        # nodes known to need no suppression at all (A0 tags, monotone without suppression)
        self.strict_yes = np.zeros(lattice.size, dtype=bool)
        self._strict_grid = lattice.grid(self.strict_yes)
        # a fully monotone search (anonymity and metric) ends after phase 1 (Flash_B); only
        # phase 2 reads `strict_yes`, so phase 1 tags it only where a phase 2 follows
        self.needs_phase2 = not (self.tagging and self.use_full and checker.metric_monotone)
        self.done = 0
        self._reported = 0
        self.best_node = -1
        self.best_loss = math.inf
        self.best_rank = -1
        # per node, or None when the metric has no cheap bound. In the fully monotone case
        # (§3.4 case 1) bound pruning during phase 1 only shortens Flash's paths and costs
        # checks, so it is used only when a second phase would otherwise be needed.
        fully_monotone = checker.anonymity_monotone and checker.metric_monotone
        self.bound_pruning = not fully_monotone
        self.static_bounds = checker.static_bounds(lattice.levels.astype(np.int64)) if self.bound_pruning else None
        self.phase2_order = "bound"
        # the keys of `evals` as a mask (the guided phase and phase 2 select among the others)
        self.evaluated = np.zeros(lattice.size, dtype=bool)
        # the bound-guided phase 1 (`_phase1_guided`): fully monotone, no suppression, a static bound
        self.guide_bounds = self._guide_bounds() if fully_monotone and self.mode == "full" else None

    def _guide_bounds(self) -> np.ndarray | None:
        """Every node's static bound where the guided phase 1 applies, else None. Without
        suppression the metrics' static bound is the loss of an anonymous node itself, so the
        open nodes are exactly those that can still win; with it the bound is loose, and Flash's
        own paths are as good."""
        if self.checker.suppression_limit != 0:
            return None
        return self.checker.static_bounds(self.lattice.levels.astype(np.int64))

    # ------------------------------------------------------------------ bookkeeping
    def _report(self) -> None:
        if self.progress is not None:
            value = max(min(self.done, self.lattice.size), self._reported)
            self._reported = value
            self.progress(value, self.lattice.size)

    def _offer(self, node: int, loss: float) -> None:
        rank = int(self.lattice.rank[node])
        if better(loss, rank, self.best_loss, self.best_rank):
            self.best_node, self.best_loss, self.best_rank = node, loss, rank

    def _evaluate(self, node: int) -> NodeEvaluation:
        ev = self.checker.evaluate(self.lattice.node_levels(node))
        self.evals[node] = ev
        self.evaluated[node] = True
        if self.needs_phase2 and ev.anonymous_strict and self.checker.strict_monotone and not self.strict_yes[node]:
            self._strict_grid[self.lattice.up_box(node)] = True
        if ev.anonymous:
            self._offer(node, ev.loss)
        return ev

    def _cannot_win(self, node: int, bound: float) -> bool:
        """Bound-based pruning; also holds for every generalization (bound monotone, rank larger)."""
        if self.best_rank < 0:
            return False
        tol = tolerance(self.best_loss)
        if bound > self.best_loss + tol:
            return True
        return bound >= self.best_loss - tol and int(self.lattice.rank[node]) > self.best_rank

    def _tag(self, box: tuple[slice, ...], value: int) -> int:
        """Set every UNKNOWN node in a level box to `value`; returns how many where a progress
        callback counts them (`done`), else 0 (the count is one more pass over the box)."""
        part = self._grid[box]
        mask = part == UNKNOWN
        part[mask] = value
        return int(np.count_nonzero(mask)) if self.progress is not None else 0

    def _prune_up(self, node: int) -> None:
        self.done += self._tag(self.lattice.up_box(node), PRUNED)

    # ------------------------------------------------------------------ phase 1: Flash_B
    def _check(self, node: int) -> bool | None:
        """Check one node and tag; None if it was pruned by the loss bound instead."""
        if self.static_bounds is not None and self._cannot_win(node, float(self.static_bounds[node])):
            self._prune_up(node)
            return None
        ev = self._evaluate(node)
        mode = self.mode
        ok = ev.anonymous if mode == "full" else ev.implied_k_ok if mode == "implied" else ev.anonymous_strict
        st = self.status
        if ok:
            self.done += self._tag(self.lattice.up_box(node), YES)
        else:
            self.done += self._tag(self.lattice.down_box(node), NO)
        st[node] = YES if ok else NO
        if self.bound_pruning and ev.bound > -math.inf and self._cannot_win(node, ev.bound):
            # nothing above can beat the best: stop classifying there (§3.4 cases 3/5)
            part = self._grid[self.lattice.up_box(node)]
            unknown = part == UNKNOWN
            gen = unknown | (part == YES)
            gen.flat[0] = False  # the node itself (corner of its box) keeps its tag
            self.done += int(np.count_nonzero(unknown & gen))
            part[gen] = PRUNED
        self._report()
        return ok

    def _find_path(self, node: int) -> list[int]:
        path = [node]
        current = node
        st = self.status
        while True:
            nxt = next((s for s in self.lattice.successors(current) if st[s] == UNKNOWN), None)
            if nxt is None:
                return path
            path.append(nxt)
            current = nxt

    def _check_path(self, path: list[int], queue: list[tuple[int, int]]) -> None:
        low, high = 0, len(path) - 1
        rank = self.lattice.rank
        while low <= high:
            mid = (low + high) // 2
            node = path[mid]
            if self.status[node] != UNKNOWN:  # tagged meanwhile: move on using the tag
                if self.status[node] in (YES, PRUNED):
                    high = mid - 1
                else:
                    low = mid + 1
                continue
            outcome = self._check(node)
            if outcome is None or outcome:
                high = mid - 1
            else:
                heapq.heappush(queue, (int(rank[node]), node))
                low = mid + 1

    @staticmethod
    def _first_wanted(order: np.ndarray, pos: int, end: int, wanted: Callable[[np.ndarray], np.ndarray],
                      chunk: int = 256) -> int:
        """Position of the first node at or after `pos` in `order` (before `end`) that `wanted`
        (node ids -> mask) keeps, or `end`: chunk by chunk, since most nodes it passes are decided."""
        while pos < end:
            hits = np.flatnonzero(wanted(order[pos:min(pos + chunk, end)]))
            if hits.size:
                return pos + int(hits[0])
            pos += chunk
        return end

    def _next_unknown(self, order: np.ndarray, pos: int) -> int:
        """Position of the first node at or after `pos` in `order` that is still UNKNOWN (or len)."""
        st = self.status
        return self._first_wanted(order, pos, order.shape[0], lambda ids: st[ids] == UNKNOWN)

    def _phase1(self) -> None:
        st = self.status
        queue: list[tuple[int, int]] = []
        order = self.lattice.order
        pos = 0
        while True:
            # the stable order, skipping tagged nodes (vectorized: most of a lattice is tagged)
            pos = self._next_unknown(order, pos)
            if pos >= order.shape[0]:
                break
            node = int(order[pos])
            pos += 1
            self._check_path(self._find_path(node), queue)
            while queue:
                _, head = heapq.heappop(queue)
                for up in self.lattice.successors(head):
                    if st[up] == UNKNOWN:
                        self._check_path(self._find_path(up), queue)

    # ------------------------------------------------------------------ phase 1, guided by the bound
    def _climb(self, node: int, bounds: np.ndarray) -> int:
        """From an open node up through open successors (lowest bound first) to one with none.

        Open: may still beat the best -- not known to fail, not evaluated, and `_cannot_win`
        does not rule it out by its bound.
        """
        st, evaluated, rank = self.status, self.evaluated, self.lattice.rank
        while True:
            step = -1
            for s in self.lattice.successors(node):
                if st[s] == NO or evaluated[s]:
                    continue
                b = bounds[s]
                if self._cannot_win(s, float(b)):
                    continue
                if step < 0 or b < bounds[step] or (b == bounds[step] and rank[s] < rank[step]):
                    step = s
            if step < 0:
                return node
            node = step

    def _next_open(self, order: np.ndarray, pos: int, end: int) -> int:
        """Position of the first node at or after `pos` in `order` neither known to fail nor evaluated (or `end`)."""
        st, evaluated = self.status, self.evaluated
        return self._first_wanted(order, pos, end, lambda ids: (st[ids] != NO) & ~evaluated[ids])

    def _phase1_guided(self) -> None:
        """Flash's paths, started where they decide the most open nodes (§3.4 case 1, no suppression).

        Without suppression an anonymous node's loss is its static bound, known for every node
        without grouping, so the search has only to learn which nodes of loss below the best are
        anonymous. Flash_B traces the whole border between anonymous and not, also where it lies
        far above any loss that could win. Here each path starts at an *open* node (bound below
        the best, not known to fail, not evaluated): the one of lowest bound, climbed to an open
        node with no open successor, so a failing check on the path above it tags as many open
        nodes as a check can. Once no node is open the best is the optimum: every other node is
        known to fail or has a bound (a lower bound of its loss, monotone) that cannot beat it,
        ties going to the earlier node of the stable order as in Flash_B.
        """
        bounds = self.guide_bounds
        assert bounds is not None
        lat = self.lattice
        st = self.status
        # ascending bound; which of equal bounds comes first changes only where paths start, not
        # the result (every node up to the first bound above the best is decided), and a sort
        # that is not stable costs a quarter of one by (bound, rank) on large lattices
        order = np.argsort(bounds)
        sorted_bounds = bounds[order]
        pos = 0
        n = order.shape[0]
        queue: list[tuple[int, int]] = []   # Flash's follow-up paths: not taken here
        while True:
            if self.best_rank >= 0:   # sorted: no node past a bound above the best can win
                n = min(n, int(np.searchsorted(sorted_bounds, self.best_loss + tolerance(self.best_loss), "right")))
            pos = self._next_open(order, pos, n)
            if pos >= n:
                break
            node = int(order[pos])
            if self._cannot_win(node, float(bounds[node])):   # a tie in the bound, later in the stable order
                pos += 1
                continue
            node = self._climb(node, bounds)
            # never YES: a YES tag above a checked node lands only on nodes that are evaluated or
            # cannot win (a successor of the maximal open node it climbed to is not open, and
            # the bound only grows upwards), so every node the loop may pick is UNKNOWN
            assert st[node] == UNKNOWN
            self._check_path(self._find_path(node), queue)
            queue.clear()
        self._report()

    # ------------------------------------------------------------------ phase 2
    def _dfs_order(self, wanted: np.ndarray) -> list[int]:
        seen = np.zeros(self.lattice.size, dtype=bool)
        out: list[int] = []
        stack = [self.lattice.bottom]
        seen[self.lattice.bottom] = True
        while stack:
            node = stack.pop()
            if wanted[node]:
                out.append(node)
            for s in reversed(self.lattice.successors(node)):
                if not seen[s]:
                    seen[s] = True
                    stack.append(s)
        return out

    def _phase2(self) -> None:
        lat = self.lattice
        st = self.status
        if self.mode in ("full", "implied"):
            candidates = st == YES  # NO = fails a necessary condition; PRUNED = cannot win
        else:
            candidates = st != PRUNED
        remaining = candidates & ~self.evaluated
        self.done = int((~remaining).sum())
        self._report()
        ids = np.flatnonzero(remaining)
        if ids.size == 0:
            return
        bounds_sub = self.checker.static_bounds(lat.levels[ids].astype(np.int64))
        bounds = np.full(lat.size, -math.inf)
        if bounds_sub is not None:
            bounds[ids] = bounds_sub
            if self.phase2_order == "bound":
                order = ids[np.lexsort((lat.rank[ids], bounds_sub))].tolist()
                sorted_by_bound = True
            else:
                order = self._dfs_order(remaining)
                sorted_by_bound = False
        else:
            order = self._dfs_order(remaining)
            sorted_by_bound = False
        # exact loss without grouping: the node is known to need no suppression
        full_no_suppression = self.mode == "full" and self.checker.suppression_limit == 0
        pruned = np.zeros(lat.size, dtype=bool)
        pruned_grid = lat.grid(pruned)
        rank = lat.rank
        for node in order:
            self.done += 1
            if pruned[node]:
                continue
            b = bounds[node]
            if self.best_rank >= 0:
                if b > self.best_loss + tolerance(self.best_loss):
                    if sorted_by_bound:
                        self.done = lat.size
                        break
                    continue
                if b >= self.best_loss - tolerance(self.best_loss) and rank[node] > self.best_rank:
                    continue
            if self.strict_yes[node] or (full_no_suppression and st[node] == YES):
                loss = self.checker.static_loss(lat.node_levels(node))
                if loss is not None:
                    self._offer(node, loss)
                    continue
            ev = self._evaluate(node)
            if self.best_rank >= 0 and ev.bound > self.best_loss + tolerance(self.best_loss):
                pruned_grid[lat.up_box(node)] = True
            if self.done % 64 == 0:
                self._report()

    # ------------------------------------------------------------------ driver
    def run(self) -> SearchOutcome:
        with one_blas_thread():
            return self._run()

    def _run(self) -> SearchOutcome:
        c = self.checker
        if self.guide_bounds is not None:
            self._phase1_guided()
        elif self.tagging:
            self._phase1()
        if self.needs_phase2:
            self._phase2()
        self.done = self.lattice.size
        self._report()
        if not self.tagging:
            algorithm = "Flash_2P (no monotone property: bound-pruned full search)"
        elif self.guide_bounds is not None:
            algorithm = "Flash_B (bound-guided)"
        elif not self.needs_phase2:
            algorithm = "Flash_B"
        else:
            algorithm = "Flash_2P"
        tagged = int((self.status != UNKNOWN).sum()) - len(self.evals)
        if self.best_rank < 0:
            return SearchOutcome(None, None, math.inf, c.checks, max(tagged, 0), algorithm)
        return SearchOutcome(
            self.best_node, self.evals.get(self.best_node), self.best_loss, c.checks, max(tagged, 0), algorithm
        )
