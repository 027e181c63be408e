"""The generalization lattice of full-domain transformations (§2.5.1.6).

Nodes are level vectors; node ids are mixed-radix numbers so that successors and
predecessors are id arithmetic. All per-node state lives in flat NumPy arrays, so
predictive tagging of every generalization/specialization of a node is a single
vectorized comparison.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from fedanon.errors import InputError

MAX_NODES = 5_000_000


class Lattice:
    """The lattice of level vectors; per-node arrays are built on first use only.

    Size, heights and strides are always available (the heuristic search for huge
    lattices works on level vectors alone and never materializes anything); the
    per-node arrays Flash tags with are built when first touched, up to MAX_NODES.
    """

    def __init__(self, heights: list[int]) -> None:
        """`heights[i]` = number of levels of QI i (max level = heights[i] - 1)."""
        if not heights or any(h < 1 for h in heights):
            raise InputError(f"invalid hierarchy heights {heights}")
        self.heights = [int(h) for h in heights]
        self.max_levels = np.array([h - 1 for h in heights], dtype=np.int64)
        size = 1
        for h in heights:
            size *= h
        self.size = size
        q = len(heights)
        strides = [1] * q
        for i in range(q - 2, -1, -1):
            strides[i] = strides[i + 1] * self.heights[i + 1]
        self.strides = np.array(strides, dtype=np.int64) if size < 1 << 62 else np.array(strides, dtype=object)
        self._successors: dict[int, tuple[int, ...]] = {}

    @property
    def materializable(self) -> bool:
        return self.size <= MAX_NODES

    def _require_materializable(self) -> None:
        """Per-node arrays exist only up to MAX_NODES nodes (the heuristic search needs none)."""
        if not self.materializable:
            raise InputError(
                f"search space of {self.size:,} transformations is too large for the exact search "
                f"(limit {MAX_NODES:,}); use the heuristic search (a node budget below the lattice size)"
            )

    @cached_property
    def levels(self) -> np.ndarray:
        self._require_materializable()
        q = len(self.heights)
        # node ids are C-order positions in the grid of shape `heights`: QI i's level is
        # broadcast straight into its column of the grid (`np.indices` and a transposed
        # copy cost 4x as much, and a Lattice is built per anonymization)
        out = np.empty((self.size, q), dtype=np.int16)
        grid = out.reshape(*self.heights, q)
        for i, h in enumerate(self.heights):
            shape = [1] * q
            shape[i] = h
            grid[..., i] = np.arange(h, dtype=np.int16).reshape(shape)
        return out

    @cached_property
    def _level_columns(self) -> list[np.ndarray]:
        return [np.ascontiguousarray(self.levels[:, i]) for i in range(len(self.heights))]

    @cached_property
    def total(self) -> np.ndarray:
        """Sum of levels per node, built as an outer sum over the grid (summing each row of
        `levels` along its short axis cost 6x as much)."""
        self._require_materializable()
        total = np.zeros((), dtype=np.int64)
        for h in self.heights:
            total = np.add.outer(total, np.arange(h, dtype=np.int64))
        return total.reshape(-1)

    @cached_property
    def order(self) -> np.ndarray:
        """Stable order (§3.8): lower total level first, then lexicographically smaller vector.

        Ids are mixed-radix numbers with QI 0 most significant, so ascending id is the
        lexicographic order and a stable sort of the ids by total level is the whole order.
        """
        total = self.total
        if int(self.max_levels.sum()) < 1 << 15:  # 2-byte keys: NumPy's stable sort is a radix sort then (3x faster)
            total = total.astype(np.int16)
        return np.argsort(total, kind="stable")

    @cached_property
    def rank(self) -> np.ndarray:
        rank = np.empty(self.size, dtype=np.int64)
        rank[self.order] = np.arange(self.size, dtype=np.int64)
        return rank

    @property
    def n_levels(self) -> int:
        return int(self.max_levels.sum()) + 1

    @property
    def bottom(self) -> int:
        return 0

    @property
    def top(self) -> int:
        return self.size - 1

    def node_id(self, levels) -> int:
        lv = np.asarray(levels, dtype=np.int64)
        if lv.shape != self.max_levels.shape or (lv < 0).any() or (lv > self.max_levels).any():
            raise InputError(f"node {tuple(levels)} is outside the lattice {tuple(self.heights)}")
        return int((lv * self.strides).sum())

    def node_levels(self, node: int) -> tuple[int, ...]:
        return tuple(self.levels[node].tolist())

    @cached_property
    def _steps(self) -> list[tuple[int, int, int]]:
        """(QI, stride, max level) per QI in descending QI order = ascending stride."""
        return [(i, int(self.strides[i]), int(self.max_levels[i])) for i in range(len(self.heights) - 1, -1, -1)]

    def successors(self, node: int) -> tuple[int, ...]:
        """Direct generalizations in stable order.

        All successors have the same total level, and raising a later QI gives a
        lexicographically smaller vector and a smaller id, so ascending id is the
        stable order: no sort needed. Cached per node (a tuple, so callers cannot alter
        the cache): Flash asks for a node's successors on every path it builds.
        """
        cached = self._successors.get(node)
        if cached is None:
            lv = self.levels[node].tolist()
            cached = self._successors[node] = tuple(node + stride for i, stride, top in self._steps if lv[i] < top)
        return cached

    def predecessors(self, node: int) -> list[int]:
        """Direct specializations in stable order (ascending id, as for successors)."""
        lv = self.levels[node].tolist()
        return [node - stride for i, stride, _ in reversed(self._steps) if lv[i] > 0]

    # Per-node state arrays indexed by node id are C-order arrays of shape `heights`
    # (QI 0 is the most significant digit of an id), so the generalizations of a node
    # are the box [l0:, l1:, ...] and its specializations the box [:l0+1, :l1+1, ...]:
    # tagging touches only the box, not every node of the lattice.
    def grid(self, per_node: np.ndarray) -> np.ndarray:
        """A view of a flat per-node array as the lattice's level grid."""
        return per_node.reshape(self.heights)

    def up_box(self, node: int) -> tuple[slice, ...]:
        """Index of every generalization of `node` (itself included) in a `grid` view."""
        return tuple(slice(l, None) for l in self.levels[node].tolist())

    def down_box(self, node: int) -> tuple[slice, ...]:
        """Index of every specialization of `node` (itself included) in a `grid` view."""
        return tuple(slice(0, l + 1) for l in self.levels[node].tolist())

    def generalizations_mask(self, node: int) -> np.ndarray:
        """Every node >= node (including itself)."""
        lv = self.levels[node]
        mask = self._level_columns[0] >= lv[0]
        for col, v in zip(self._level_columns[1:], lv[1:]):
            if v > 0:
                mask &= col >= v
        return mask

    def specializations_mask(self, node: int) -> np.ndarray:
        """Every node <= node (including itself)."""
        lv = self.levels[node]
        mask = self._level_columns[0] <= lv[0]
        for col, v, top in zip(self._level_columns[1:], lv[1:], self.max_levels[1:]):
            if v < top:
                mask &= col <= v
        return mask
