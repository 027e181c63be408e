"""Entry point: anonymize one encoded table optimally.

Wires the pieces together and materializes the chosen transformation. Preparation
has two halves: the *structure* (code maps, grouper, lattice -- valid for any table
the searching party holds, pseudotuples included) and the *statistics* (totals,
reference distributions, metric cardinalities -- facts about the true rows). The
centralized path derives both from one table; Protocol C builds the structure at its
helper, gets the statistics from the key holder and supplies its own checker. The
search (flash.py) never knows which.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from fedanon.engine.check.checker import Checker, ClassJudge, LocalChecker, NodeEvaluation
from fedanon.model.config import AnonymizationConfig
from fedanon.model.criterion import CriterionContext, build_criteria, saturation_thresholds
from fedanon.engine.search.flash import FlashSearch, SearchOutcome
from fedanon.stats.classes import Classes
from fedanon.engine.check.grouping import Grouper
from fedanon.stats.keys import value_counts
from fedanon.engine.search.heuristic import HeuristicSearch, SearchLimits
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.search.lattice import Lattice
from fedanon.model.metrics.base import MetricContext
from fedanon.model.metrics.registry import build_metric
from fedanon.engine.check.backends.base import DEFAULT_BACKEND, backend_for
from fedanon.engine.result import AnonymizationResult, NoSolutionError
from fedanon.data.table import EncodedTable
from fedanon.errors import HierarchyError, InputError

SUPPRESSED = b"*"


@dataclass
class Structure:
    """What the search needs that does not depend on row counts: code maps, grouper, lattice.

    Built from whatever table the searching party holds -- for Protocol C's helper that
    table includes pseudotuples, so nothing here may be used as a statistic of the data.
    """

    table: EncodedTable
    config: AnonymizationConfig
    qi_index: list[int]
    code_maps: list[np.ndarray]
    level_dicts: list[list[list[bytes]]]
    grouper: Grouper
    lattice: Lattice
    hierarchies: dict[str, Hierarchy]
    #: sensitive attribute -> code map of its hierarchy (hierarchical t-closeness)
    sensitive_code_maps: dict[str, np.ndarray]


@dataclass
class Statistics:
    """Table-wide facts criteria and metrics need (totals, reference distributions, bounds).

    Derived from the true rows: locally by `local_statistics`, in Protocol C by the key
    holder from decrypted counts.
    """

    criteria: CriterionContext
    metric: MetricContext


@dataclass
class Prepared(Structure):
    """Structure + statistics + the local checker: everything `anonymize` uses."""

    statistics: Statistics | None = None
    checker: LocalChecker | None = None  # type: ignore[assignment]


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


def prepare_structure(
    table: EncodedTable,
    hierarchies: dict[str, Hierarchy],
    config: AnonymizationConfig,
    research_subset: np.ndarray | None = None,
    *,
    require_subset: bool = True,
) -> Structure:
    """Validate inputs and build code maps, grouper and lattice (no statistics).

    `require_subset=False` lets a caller whose research-subset flags are hidden from it
    (Protocol C: they are encrypted counters) build the structure for delta-presence.
    """
    config.ensure_valid()  # a no-op on a config validated where it entered
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

    # sensitive attributes: per-row codes, per-attribute totals, optional hierarchy code map
    sens_codes: dict[str, np.ndarray] = {}
    sens_sizes: dict[str, int] = {}
    sens_maps: dict[str, np.ndarray] = {}
    for attr in sensitive_attributes(config):
        ci = table.column_index(attr)
        sens_codes[attr] = table.codes[:, ci].astype(np.int64)
        sens_sizes[attr] = len(table.dictionaries[ci])
        if attr in hierarchies:
            sens_maps[attr] = hierarchies[attr].code_map(table.dictionaries[ci])[0]
    subset = None
    if research_subset is not None:
        subset = np.asarray(research_subset, dtype=bool)
        if subset.shape != (table.n_rows,):
            raise InputError(
                f"research subset has {subset.shape[0] if subset.ndim else 0} flags for {table.n_rows} rows"
            )
    elif config.needs_subset and require_subset:
        raise InputError("delta-presence needs a research subset (one flag per row)")

    # per-column views: no n x QIs copy (a column-major table's columns are used without copying)
    grouper = Grouper([table.codes[:, ci] for ci in qi_index], code_maps, sens_codes, sens_sizes, subset,
                      saturation=saturation_thresholds(build_criteria(config)))
    lattice = Lattice([int(cm.shape[0]) for cm in code_maps])
    return Structure(table, config, qi_index, code_maps, level_dicts, grouper, lattice, hierarchies, sens_maps)


def sensitive_attributes(config: AnonymizationConfig) -> list[str]:
    """Attributes whose per-class histograms some criterion needs, in a stable order."""
    return sorted({c.needs_histogram for c in build_criteria(config) if c.needs_histogram})


def local_statistics(structure: Structure) -> Statistics:
    """Statistics from the structure's own rows (every row is real)."""
    grouper = structure.grouper
    table = structure.table
    subset = grouper.subset
    context = CriterionContext(
        n_rows=table.n_rows,
        histograms_total={a: value_counts(c, grouper.sensitive_sizes[a]) for a, c in grouper.sensitive_codes.items()},
        sensitive_code_maps=structure.sensitive_code_maps,
        subset_total=None if subset is None else int(subset.sum()),
        sensitive_values={a: list(table.dictionaries[table.column_index(a)]) for a in grouper.sensitive_codes},
    )
    cards = []
    for i, cm in enumerate(structure.code_maps):
        # one pass over the rows per QI; the counts of higher levels are sums of level-0 counts
        # (integers below 2^53, so the float weights are exact)
        level0 = value_counts(grouper.qi_column(i), cm.shape[1]).astype(np.float64)
        cards.append([np.bincount(cm[l], weights=level0, minlength=len(structure.level_dicts[i][l])).astype(np.int64)
                      for l in range(cm.shape[0])])
    return Statistics(context, metric_context(structure, table.n_rows, cards))


class LossFractions(Sequence[list[np.ndarray]]):
    """Per QI, per level: Iyengar's loss fraction of each level value (`Hierarchy.loss_fractions`),
    computed on first use of a QI.

    Why lazy: only the loss metric reads them (the search's, or the report's scores), and
    counting each level's leaves walks every hierarchy row in Python -- about 0.2 ms of a
    9 ms ADULT search that uses another metric.
    """

    def __init__(self, structure: Structure) -> None:
        self._structure = structure
        self._per_qi: dict[int, list[np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self._structure.code_maps)

    def __getitem__(self, i: int) -> list[np.ndarray]:  # type: ignore[override]
        i = int(i) + (len(self) if i < 0 else 0)
        if not 0 <= i < len(self):
            raise IndexError(i)
        fractions = self._per_qi.get(i)
        if fractions is None:
            s = self._structure
            hierarchy = s.hierarchies[s.config.quasi_identifiers[i]]
            fractions = self._per_qi[i] = [hierarchy.loss_fractions(l, s.level_dicts[i][l])
                                           for l in range(s.code_maps[i].shape[0])]
        return fractions


class InputClassSizes:
    """The sizes of the input's classes at the bottom node (every QI at level 0), grouped once,
    on first call.

    Why lazy: only a metric that compares the release with the input's joint QI distribution
    (KL divergence) reads them, and grouping every row costs as much as one check.
    """

    def __init__(self, grouper: Grouper) -> None:
        self._grouper = grouper
        self._sizes: np.ndarray | None = None

    def __call__(self) -> np.ndarray:
        if self._sizes is None:
            bottom = tuple(0 for _ in range(self._grouper.n_qis))
            self._sizes = np.asarray(self._grouper.group_rows(bottom).stats.sizes)
        return self._sizes


def metric_context(structure: Structure, n_rows: int, cardinalities: list[list[np.ndarray]]) -> MetricContext:
    """Metric facts from the hierarchies plus per-level value counts of the true rows."""
    return MetricContext(
        n_rows=n_rows,
        heights=[int(cm.shape[0]) for cm in structure.code_maps],
        cardinalities=cardinalities,
        level0_to_level=structure.code_maps,
        leaf_fraction=LossFractions(structure),
        min_class_size=max(c.min_class_size for c in build_criteria(structure.config)),
        input_class_sizes=InputClassSizes(structure.grouper),
    )


def local_checker(structure: Structure, statistics: Statistics) -> LocalChecker:
    """The checker over in-memory class statistics."""
    config = structure.config
    criteria = build_criteria(config)
    metric = build_metric(config.metric, statistics.metric, config.metric_weights())
    return LocalChecker(structure.grouper, criteria, metric, config.suppression, statistics.criteria)


def prepare(
    table: EncodedTable,
    hierarchies: dict[str, Hierarchy],
    config: AnonymizationConfig,
    research_subset: np.ndarray | None = None,
) -> Prepared:
    """Structure, local statistics and local checker in one step (the centralized case)."""
    structure = prepare_structure(table, hierarchies, config, research_subset)
    statistics = local_statistics(structure)
    checker = local_checker(structure, statistics)
    return Prepared(**{f: getattr(structure, f) for f in Structure.__dataclass_fields__},
                    statistics=statistics, checker=checker)


def generalize(structure: Structure, levels: tuple[int, ...], suppressed: np.ndarray | None = None) -> EncodedTable:
    """The table at `levels`: QI cells generalized, QI cells of `suppressed` rows set to "*"."""
    table = structure.table
    # column-major whatever the input's layout: every column below is written whole, and a
    # strided column of a row-major table cost twice as much to write (the CSV writer and
    # the report read the output column by column too)
    codes = np.empty(table.codes.shape, dtype=table.codes.dtype, order="F")
    dictionaries = [list(d) for d in table.dictionaries]
    hide = suppressed is not None and bool(suppressed.any())
    generalized = dict(zip(structure.qi_index, enumerate(levels)))
    for ci in range(codes.shape[1]):  # column by column: no temporary of the whole table
        if ci not in generalized:
            codes[:, ci] = table.codes[:, ci]
            continue
        i, level = generalized[ci]
        dictionary = list(structure.level_dicts[i][level])
        column = codes[:, ci]
        # the search's generalized column (cached at the optimum, 1-2 bytes a row), widened:
        # a copy instead of a gather of every row, each column written whole
        column[:] = structure.grouper.column(i, level)
        if hide:
            try:
                star = dictionary.index(SUPPRESSED)
            except ValueError:
                star = len(dictionary)
                dictionary.append(SUPPRESSED)
            column[suppressed] = star
        dictionaries[ci] = dictionary
    return EncodedTable(list(table.columns), codes, dictionaries)


def materialize(
    prep: Structure, levels: tuple[int, ...], checker: LocalChecker | ClassJudge | None = None,
    classes: Classes | None = None,
) -> tuple[EncodedTable, np.ndarray, int]:
    """Apply a transformation: generalize QI cells, suppress rows of failing classes.

    `classes`: the node's classes grouped from the rows with `row_class` (grouped here if not given).
    """
    judge = checker if checker is not None else getattr(prep, "checker", None)
    if judge is None:
        raise ValueError("materialize needs a checker that can name failing classes")
    if classes is None:
        classes = prep.grouper.group_rows(levels, keep_rows=True)
    failing = np.asarray(judge.failing_classes(classes.stats, classes.codes), dtype=bool)
    suppressed = failing[classes.row_class] if failing.any() else np.zeros(prep.table.n_rows, dtype=bool)
    kept = classes.count - int(failing.sum())
    return generalize(prep, levels, suppressed), suppressed, kept


def search(
    structure: Structure, checker: Checker, progress: Callable[[int, int], None] | None = None
) -> SearchOutcome:
    """Run Flash against any checker; `NoSolutionError` if no node is anonymous."""
    outcome = FlashSearch(structure.lattice, checker, progress).run()
    if outcome.node is None:
        raise NoSolutionError(
            "no transformation satisfies the privacy model"
            + (f" within the suppression limit of {checker.suppression_limit} rows" if structure.config.suppression
               else " without suppression (try allowing some suppression or weaker parameters)")
        )
    return outcome


def anonymize(
    table: EncodedTable,
    hierarchies: dict[str, Hierarchy],
    config: AnonymizationConfig,
    *,
    research_subset: np.ndarray | None = None,
    progress: Callable[[int, int], None] | None = None,
    limits: SearchLimits | None = None,
    workers: int = 1,
    backend: str = DEFAULT_BACKEND,
    scheduler: str | None = None,
    keep_prepared: bool = False,
) -> AnonymizationResult:
    """Find and apply the globally optimal full-domain generalization (+ suppression).

    Beyond `limits.node_budget` nodes the heuristic search runs instead of Flash; with
    a `limits.time_limit` it may return a verified but not proven-optimal node
    (`optimum_found` false, `loss_lower_bound` and `gap` in `extra`). `workers` > 1
    groups the rows of a check in that many processes (`backends/processes.py`; same result).
    `backend` names where row groupings run (`backends/base.py`): "processes" (local processes
    over shared memory), or "dask": a Dask cluster -- the one at `scheduler` (tcp://host:port),
    else a local cluster of `workers` processes on loopback; the same optimum either way.
    `keep_prepared`: the result keeps the search's structure and the optimum's classes
    (`prepared`, `optimum_classes`) for a report to reuse; off by default, because they hold
    the grouper's caches (up to a few hundred MB on millions of rows) for as long as the result lives.
    """
    start = time.perf_counter()
    if not isinstance(table, EncodedTable):
        raise InputError(f"anonymize() takes an EncodedTable, got {type(table).__name__}"
                         + ("; for a pandas DataFrame use fedanon.anonymize_frame" if hasattr(table, "columns") else ""))
    prep = prepare(table, hierarchies, config, research_subset)
    options = {} if scheduler is None else {"scheduler": scheduler}
    attaching = time.perf_counter()
    with backend_for(backend, prep.grouper, workers, **options) as pool:
        attached = time.perf_counter()
        result = search_and_apply(prep, prep.checker, progress=progress, started=start, limits=limits)
    # the processes that grouped rows: 1 where asked for, or where shared memory was refused
    result.extra["workers"] = pool.workers if pool is not None else 1
    if pool is not None:  # starting the workers and handing them the rows: part of elapsed_s
        result.extra.update(backend=backend, backend_start_s=attached - attaching)
    if not keep_prepared:
        result.prepared = result.optimum_classes = None
    return result


def gap(loss: float, lower_bound: float) -> float:
    """Relative distance of a loss to a lower bound of the optimum (0 = proven optimal)."""
    if loss <= lower_bound:
        return 0.0
    return (loss - lower_bound) / loss if loss > 0 else 0.0


def search_and_apply(
    prep: Prepared,
    checker: LocalChecker,
    *,
    progress: Callable[[int, int], None] | None = None,
    started: float | None = None,
    limits: SearchLimits | None = None,
) -> AnonymizationResult:
    """Run Flash against any checker and materialize its optimum.

    `checker` must be able to name failing classes (a `LocalChecker`); a checker whose
    counts live elsewhere (Protocol C) uses `search` and `generalize` instead.
    """
    start = time.perf_counter() if started is None else started
    config = prep.config
    limits = limits or SearchLimits()
    extra: dict = {}
    evaluation: NodeEvaluation | None = None  # the optimum's check, where the search kept it
    if prep.lattice.size <= limits.node_budget:
        outcome = FlashSearch(prep.lattice, checker, progress).run()
        node_levels = None if outcome.node is None else prep.lattice.node_levels(outcome.node)
        evaluation = outcome.evaluation
        best_loss, checks, algorithm, tagged, optimum_found = (outcome.loss, outcome.checks, outcome.algorithm,
                                                               outcome.tagged, outcome.optimum_found)
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
    grouper = prep.grouper
    if evaluation is not None and evaluation.suppressed_rows == 0 and not grouper.sensitive_codes \
            and grouper.subset is None:
        # no class fails (its check suppressed nothing) and nothing downstream needs each row's
        # class: the output is the generalized columns, from the classes the search most likely
        # stored -- no second grouping of every row with its row -> class map
        optimum, _ = grouper.classes(levels)
        output, suppressed, kept = generalize(prep, levels), np.zeros(prep.table.n_rows, dtype=bool), optimum.count
    else:
        optimum = grouper.group_rows(levels, keep_rows=True)
        output, suppressed, kept = materialize(prep, levels, checker, optimum)
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
        prepared=prep,
        optimum_classes=optimum,
    )
