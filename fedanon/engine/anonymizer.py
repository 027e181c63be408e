"""Entry point: anonymize one encoded table optimally.

Wires the pieces together -- code maps from hierarchies, the grouper, criteria,
metric, local checker and Flash -- and materializes the chosen transformation.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from fedanon.engine.checker import Checker, LocalChecker
from fedanon.engine.config import AnonymizationConfig
from fedanon.engine.criteria import CriterionContext, build_criteria
from fedanon.engine.flash import FlashSearch
from fedanon.engine.grouping import Grouper
from fedanon.engine.heuristic import HeuristicSearch, SearchLimits
from fedanon.engine.hierarchy import Hierarchy
from fedanon.engine.lattice import Lattice
from fedanon.engine.metrics import MetricContext, build_metric
from fedanon.engine.result import AnonymizationResult, NoSolutionError
from fedanon.engine.table import EncodedTable
from fedanon.errors import HierarchyError, InputError

SUPPRESSED = b"*"


@dataclass
class Prepared:
    """Everything derived from the input once, shared by checker and materialization."""

    table: EncodedTable
    config: AnonymizationConfig
    qi_index: list[int]
    code_maps: list[np.ndarray]
    level_dicts: list[list[list[bytes]]]
    grouper: Grouper
    checker: LocalChecker
    lattice: Lattice


def _check_coverage(table: EncodedTable, column: int, hierarchy: Hierarchy) -> None:
    """Name the first data row whose value the hierarchy lacks (file line = row + 1 with a header)."""
    missing = hierarchy.missing_codes(table.dictionaries[column])
    if not missing:
        return
    rows = np.flatnonzero(np.isin(table.codes[:, column], missing))
    first = int(rows[0])
    value = table.dictionaries[column][int(table.codes[first, column])]
    shown = value.decode("utf-8", errors="backslashreplace")
    raise HierarchyError(
        f"value {shown!r} of column {table.columns[column]!r} in data row {first + 1} "
        f"(line {first + 2} of a CSV with header) is missing from its hierarchy"
        + (f" {hierarchy.source}" if hierarchy.source else "")
        + (f"; {len(missing)} distinct values are missing in total" if len(missing) > 1 else "")
    )


def prepare(
    table: EncodedTable,
    hierarchies: dict[str, Hierarchy],
    config: AnonymizationConfig,
    research_subset: np.ndarray | None = None,
) -> Prepared:
    """Validate inputs and build grouper, criteria, metric and checker."""
    config.validate()
    if table.n_rows == 0:
        raise InputError("the input table has no rows")
    qis = list(config.quasi_identifiers)
    qi_index = [table.column_index(q) for q in qis]
    for q in qis:
        if q not in hierarchies:
            raise InputError(f"no hierarchy given for quasi-identifier {q!r}")
    code_maps: list[np.ndarray] = []
    level_dicts: list[list[list[bytes]]] = []
    for q, ci in zip(qis, qi_index):
        _check_coverage(table, ci, hierarchies[q])
        cm, dicts = hierarchies[q].code_map(table.dictionaries[ci])
        code_maps.append(cm)
        level_dicts.append(dicts)
    criteria = build_criteria(config)

    # sensitive attributes: per-row codes, per-attribute totals, optional hierarchy code map
    sens_codes: dict[str, np.ndarray] = {}
    sens_sizes: dict[str, int] = {}
    sens_maps: dict[str, np.ndarray] = {}
    for attr in {c.needs_histogram for c in criteria if c.needs_histogram}:
        ci = table.column_index(attr)
        sens_codes[attr] = table.codes[:, ci].astype(np.int64)
        sens_sizes[attr] = len(table.dictionaries[ci])
        if attr in hierarchies:
            sens_maps[attr] = hierarchies[attr].code_map(table.dictionaries[ci])[0]
    subset = None
    if any(c.needs_subset for c in criteria):
        if research_subset is None:
            raise InputError("delta-presence needs a research subset (one flag per row)")
    if research_subset is not None:
        subset = np.asarray(research_subset, dtype=bool)
        if subset.shape != (table.n_rows,):
            raise InputError(
                f"research subset has {subset.shape[0] if subset.ndim else 0} flags for {table.n_rows} rows"
            )
    elif config.delta_presence is not None:
        raise InputError("delta-presence needs a research subset (one flag per row)")

    qi_codes = table.codes[:, qi_index]
    grouper = Grouper(qi_codes, code_maps, sens_codes, sens_sizes, subset)
    context = CriterionContext(
        n_rows=table.n_rows,
        histograms_total={a: np.bincount(c, minlength=sens_sizes[a]).astype(np.int64) for a, c in sens_codes.items()},
        sensitive_code_maps=sens_maps,
        subset_total=None if subset is None else int(subset.sum()),
    )
    heights = [int(cm.shape[0]) for cm in code_maps]
    cards = []
    leaf = []
    for i, (q, cm) in enumerate(zip(qis, code_maps)):
        col = qi_codes[:, i]
        per_level = []
        per_leaf = []
        total_leaves = len(hierarchies[q].rows)
        for l in range(cm.shape[0]):
            per_level.append(np.bincount(cm[l][col], minlength=len(level_dicts[i][l])).astype(np.int64))
            counts = hierarchies[q].leaf_counts(l, level_dicts[i][l])
            per_leaf.append((counts - 1) / (total_leaves - 1) if total_leaves > 1 else np.zeros(len(counts)))
        cards.append(per_level)
        leaf.append(per_leaf)
    mctx = MetricContext(
        n_rows=table.n_rows,
        heights=heights,
        cardinalities=cards,
        level0_to_level=code_maps,
        leaf_fraction=leaf,
        min_class_size=max(c.min_class_size for c in criteria),
    )
    metric = build_metric(config.metric, mctx)
    checker = LocalChecker(grouper, criteria, metric, config.suppression, context)
    return Prepared(table, config, qi_index, code_maps, level_dicts, grouper, checker, Lattice(heights))


def materialize(
    prep: Prepared, levels: tuple[int, ...], checker: Checker | None = None
) -> tuple[EncodedTable, np.ndarray, int]:
    """Apply a transformation: generalize QI cells, suppress rows of failing classes."""
    table = prep.table
    classes = prep.grouper.group_rows(levels, keep_rows=True)
    failing = np.asarray((checker or prep.checker).failing_classes(classes.stats), dtype=bool)
    suppressed = failing[classes.row_class] if failing.any() else np.zeros(table.n_rows, dtype=bool)
    codes = table.codes.copy()
    dictionaries = [list(d) for d in table.dictionaries]
    for i, (ci, level) in enumerate(zip(prep.qi_index, levels)):
        dictionary = list(prep.level_dicts[i][level])
        col = prep.code_maps[i][level][table.codes[:, ci]]
        if suppressed.any():
            try:
                star = dictionary.index(SUPPRESSED)
            except ValueError:
                star = len(dictionary)
                dictionary.append(SUPPRESSED)
            col = np.where(suppressed, star, col)
        codes[:, ci] = col
        dictionaries[ci] = dictionary
    kept = classes.count - int(failing.sum())
    return EncodedTable(list(table.columns), codes, dictionaries), suppressed, kept


def anonymize(
    table: EncodedTable,
    hierarchies: dict[str, Hierarchy],
    config: AnonymizationConfig,
    *,
    research_subset: np.ndarray | None = None,
    progress: Callable[[int, int], None] | None = None,
    limits: SearchLimits | None = None,
) -> AnonymizationResult:
    """Find and apply the globally optimal full-domain generalization (+ suppression).

    Beyond `limits.node_budget` nodes the heuristic search runs instead of Flash; with
    a `limits.time_limit` it may return a verified but not proven-optimal node
    (`optimum_found` false, `loss_lower_bound` and `gap` in `extra`).
    """
    start = time.perf_counter()
    if not isinstance(table, EncodedTable):
        raise InputError(f"anonymize() takes an EncodedTable, got {type(table).__name__}"
                         + ("; for a pandas DataFrame use fedanon.anonymize_frame" if hasattr(table, "columns") else ""))
    prep = prepare(table, hierarchies, config, research_subset)
    return search_and_apply(prep, prep.checker, progress=progress, started=start, limits=limits)


def gap(loss: float, lower_bound: float) -> float:
    """Relative distance of a loss to a lower bound of the optimum (0 = proven optimal)."""
    if loss <= lower_bound:
        return 0.0
    return (loss - lower_bound) / loss if loss > 0 else 0.0


def search_and_apply(
    prep: Prepared,
    checker: Checker,
    *,
    progress: Callable[[int, int], None] | None = None,
    started: float | None = None,
    limits: SearchLimits | None = None,
) -> AnonymizationResult:
    """Run Flash against any checker and materialize its optimum.

    This is the seam for checkers that are not local (Protocol C: class counts are
    Paillier-encrypted and judged by a key holder): build `prepare(...)` on the
    table the helper holds, wrap its grouper in the remote checker, call this.
    """
    start = time.perf_counter() if started is None else started
    config = prep.config
    limits = limits or SearchLimits()
    extra: dict = {}
    if prep.lattice.size <= limits.node_budget:
        outcome = FlashSearch(prep.lattice, checker, progress).run()
        node_levels = None if outcome.node is None else prep.lattice.node_levels(outcome.node)
        best_loss, checks, algorithm, tagged, optimum_found = (outcome.loss, outcome.checks, outcome.algorithm,
                                                               outcome.tagged, True)
    else:
        h = HeuristicSearch(prep.lattice, checker, limits.time_limit, progress).run()
        node_levels, best_loss, checks, algorithm, tagged = h.levels, h.loss, h.checks, h.algorithm, 0
        optimum_found = h.optimum_found
        extra = {"loss_lower_bound": h.loss_lower_bound, "expanded": h.expanded, "node_budget": limits.node_budget,
                 "time_limit_s": limits.time_limit}
        if node_levels is not None:
            extra["gap"] = gap(best_loss, h.loss_lower_bound)
    if node_levels is None:
        raise NoSolutionError(
            "no transformation satisfies the privacy model"
            + (f" within the suppression limit of {checker.suppression_limit} rows" if config.suppression else
               " without suppression (try allowing some suppression or weaker parameters)")
            + ("" if optimum_found else f" (none found within the {limits.time_limit:g} s time limit)")
        )
    levels = node_levels
    output, suppressed, kept = materialize(prep, levels, checker)
    elapsed = time.perf_counter() - start
    return AnonymizationResult(
        transformation={q: int(l) for q, l in zip(config.quasi_identifiers, levels)},
        output=output,
        suppressed=suppressed,
        suppressed_rows=int(suppressed.sum()),
        information_loss=float(best_loss),
        metric=config.metric,
        classes=kept,
        checks=checks,
        rollups=prep.grouper.rollups,
        elapsed_s=elapsed,
        lattice_size=prep.lattice.size,
        optimum_found=optimum_found,
        algorithm=algorithm,
        tagged=tagged,
        extra={"row_groupings": prep.grouper.row_groupings, **extra},
    )
