"""The "anonymize, then integrate" baselines of dissertation §4.3 (Table 4.1).

Why: the reason a consortium runs a secure protocol instead of letting every
institution anonymize its own share and pooling the results is data quality. These
baselines compute what the institutions would get without fedanon, with the same
engine and settings, so every run can say how much information secure integration
keeps.

* **Horizontal** -- every party anonymizes its own rows optimally under the run's
  model and suppression limit (a fraction of its own rows); the results are
  appended. This is local recoding: each party may choose another transformation.
* **Vertical** -- one party anonymizes the columns it holds (its quasi-identifiers,
  plus the sensitive attribute the model judges); every other party then generalizes
  each of its quasi-identifiers to the lowest level at which the attribute is constant
  inside every class the anonymizing party kept, so the joined table keeps exactly
  those classes (§4.3: "so weit generalisiert, dass die integrierte Version die
  ursprünglichen Klassen beibehält"). Rows the anonymizing party suppressed stay
  suppressed. The dissertation does not say which party anonymizes; every party is
  tried and the lowest-loss baseline is kept, so the comparison never flatters the
  secure result.

Loss is always measured with the run's metric on the pooled table (all rows, the
pooled value frequencies), by `recoded_loss`, which takes one generalization level
per row and quasi-identifier. For one level vector shared by all rows it equals the
engine's loss at that node; the secure result's loss is computed by the same function
so the percentage compares like with like. The dissertation's §4.3 excludes
t-closeness and delta-presence (they do not decompose over shares); so does this
module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from fedanon.engine.anonymizer import anonymize
from fedanon.model.config import AnonymizationConfig
from fedanon.model.metrics.registry import metric_types
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.result import AnonymizationResult, NoSolutionError
from fedanon.data.table import EncodedTable
from fedanon.errors import InputError

# metrics whose loss can be evaluated on a table each party recoded on its own
BASELINE_METRICS = tuple(name for name, metric in metric_types().items() if metric.has_baseline)


@dataclass
class BaselineResult:
    """One baseline next to the secure (= centralized) optimum, both on the pooled table."""

    split: str
    parties: int
    metric: str
    secure_loss: float
    baseline_loss: float
    suppressed_rows: int
    details: dict[str, Any] = field(default_factory=dict)
    row_levels: np.ndarray | None = field(default=None, repr=False)  # rows x QIs, the baseline's recoding
    suppressed: np.ndarray | None = field(default=None, repr=False)  # the baseline's suppressed rows

    @property
    def percent(self) -> float | None:
        """The secure result's loss as a percentage of the baseline's (Table 4.1's figure)."""
        if self.baseline_loss == 0:
            return 100.0 if self.secure_loss == 0 else None
        return 100.0 * self.secure_loss / self.baseline_loss

    def to_report(self) -> dict[str, Any]:
        return {"split": self.split, "parties": self.parties, "metric": self.metric,
                "secure_loss": self.secure_loss, "baseline_loss": self.baseline_loss,
                "percent": self.percent, "baseline_suppressed_rows": self.suppressed_rows, **self.details}

    def one_line(self) -> str:
        pct = "n/a" if self.percent is None else f"{self.percent:.0f} %"
        return (f"loss {self.secure_loss:.4g} vs. {self.baseline_loss:.4g} anonymizing each share alone "
                f"(§4.3 baseline, {self.metric}): {pct} of the baseline's loss")


# --------------------------------------------------------------------------- loss of a recoded table
class _QiLevels:
    """One quasi-identifier of the pooled table: its level codes, counts and labels."""

    def __init__(self, table: EncodedTable, name: str, hierarchy: Hierarchy) -> None:
        col = table.codes[:, table.column_index(name)]
        code_map, labels = hierarchy.code_map(table.dictionaries[table.column_index(name)])
        self.height = int(code_map.shape[0])
        self.codes = [code_map[level][col].astype(np.int64) for level in range(self.height)]
        self.counts = [np.bincount(c, minlength=len(labels[level])).astype(np.float64)
                       for level, c in enumerate(self.codes)]
        self.leaf_fraction = [hierarchy.loss_fractions(level, labels[level]) for level in range(self.height)]

    def at(self, levels: np.ndarray) -> np.ndarray:
        """Each row's code at its own level, offset per level so codes of different levels never meet."""
        out = np.empty(levels.shape[0], dtype=np.int64)
        offset = 0
        for level in range(self.height):
            rows = levels == level
            out[rows] = self.codes[level][rows] + offset
            offset += len(self.counts[level])
        return out

    def per_level(self, levels: np.ndarray, values: Callable[[int], np.ndarray]) -> np.ndarray:
        """Gather per-row values from a per-level table `values(level)` indexed by level code."""
        out = np.empty(levels.shape[0], dtype=np.float64)
        for level in range(self.height):
            rows = levels == level
            out[rows] = values(level)[self.codes[level][rows]]
        return out


def _entropy_terms(metric: str, original: np.ndarray, generalized: np.ndarray) -> np.ndarray:
    """Per-row entropy loss: x = card(original) / card(generalized); NUE -log2 x, EM -x log2 x."""
    x = original / generalized
    return -np.log2(x) if metric == "nonuniform-entropy" else -x * np.log2(x)


def _class_sizes(keys: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
    if not rows.any():
        return np.zeros(0, dtype=np.int64)
    stacked = np.stack([k[rows] for k in keys], axis=1)
    _, sizes = np.unique(stacked, axis=0, return_counts=True)
    return sizes.astype(np.int64)


def recoded_loss(table: EncodedTable, hierarchies: dict[str, Hierarchy], config: AnonymizationConfig,
                 row_levels: np.ndarray, suppressed: np.ndarray) -> float:
    """The run's metric for a table whose rows carry their own levels (local recoding).

    `row_levels` is rows x QIs (in `config.quasi_identifiers` order), `suppressed` one
    flag per row. Every metric follows the engine's definition (metrics.py) with the
    node's level replaced by each row's level; classes are rows with equal generalized
    values. With one level vector for all rows this is the engine's loss at that node.
    """
    if config.metric not in BASELINE_METRICS:
        raise InputError(f"no baseline loss for metric {config.metric!r}; "
                         f"choose one of: {', '.join(BASELINE_METRICS)}")
    info = [_QiLevels(table, name, hierarchies[name]) for name in config.quasi_identifiers]
    return _loss_of(info, config.metric, table.n_rows, row_levels, suppressed)


def _loss_of(info: list[_QiLevels], metric: str, n: int, row_levels: np.ndarray, suppressed: np.ndarray) -> float:
    """`recoded_loss` on quasi-identifiers already prepared (so a caller trying many recodings builds them once)."""
    q = len(info)
    row_levels = np.asarray(row_levels, dtype=np.int64).reshape(n, q)
    suppressed = np.asarray(suppressed, dtype=bool)
    s = int(suppressed.sum())
    kept = ~suppressed
    if metric == "height":
        return math.fsum(row_levels.sum(axis=1).tolist()) / n
    relative = np.stack([row_levels[:, i] / (qi.height - 1) if qi.height > 1 else np.zeros(n)
                         for i, qi in enumerate(info)], axis=1)
    if metric == "precision-star":
        return math.fsum(relative.ravel().tolist()) / (n * q)
    if metric == "precision":
        return (math.fsum(relative[kept].ravel().tolist()) + s * q) / (n * q)
    if metric == "loss":
        cells = [qi.per_level(row_levels[:, i], lambda lv, qi=qi: qi.leaf_fraction[lv])[kept]
                 for i, qi in enumerate(info)]
        return (math.fsum(np.concatenate(cells).tolist()) + s * q) / (n * q)
    keys = [qi.at(row_levels[:, i]) for i, qi in enumerate(info)]
    if metric in ("aecs", "discernibility", "discernibility-star"):
        kept_sizes = _class_sizes(keys, kept)
        if metric == "aecs":
            return n / max(len(kept_sizes) + (1 if s else 0), 1)
        if metric == "discernibility":
            return float(int((kept_sizes * kept_sizes).sum()) + n * s)
        sizes = _class_sizes(keys, np.ones(n, dtype=bool))
        return float(int((sizes * sizes).sum()))
    # entropy metrics: every row at its own level, plus (with suppression) the loss of
    # generalizing the suppressed rows from their state to one suppressed class (§3.6.2)
    terms = []
    for i, qi in enumerate(info):
        original = qi.counts[0][qi.codes[0]]
        generalized = qi.per_level(row_levels[:, i], lambda lv, qi=qi: qi.counts[lv])
        terms.append(_entropy_terms(metric, original, generalized))
        if s:
            _, counts = np.unique(keys[i][suppressed], return_counts=True)
            counts = counts.astype(np.float64)
            terms.append(counts * _entropy_terms(metric, counts, np.full_like(counts, float(s))))
    return math.fsum(np.concatenate(terms).tolist())


# --------------------------------------------------------------------------- the baselines
def _check_supported(config: AnonymizationConfig) -> None:
    config.ensure_valid()  # a no-op on a config validated where it entered
    undecomposable = [f"{m.flag.lstrip('-')} ({m.describe()})" for m in config.models if not m.decomposes_over_shares]
    if undecomposable:
        raise InputError("the anonymize-then-integrate baselines cover models judged on each party's own "
                         "classes (k-anonymity, l-diversity), as dissertation §4.3 does; "
                         f"{', '.join(undecomposable)} does not decompose over shares")
    if config.metric not in BASELINE_METRICS:
        raise InputError(f"no baseline loss for metric {config.metric!r}")


def _uniform_levels(config: AnonymizationConfig, transformation: dict[str, int], n: int) -> np.ndarray:
    return np.tile(np.array([transformation[q] for q in config.quasi_identifiers], dtype=np.int64), (n, 1))


def _sub_table(table: EncodedTable, rows: np.ndarray | None, columns: Sequence[str]) -> EncodedTable:
    """Re-encode a share from its values, so its dictionaries hold only values it has."""
    part = table.select(list(columns))
    if rows is not None:
        part = EncodedTable(part.columns, part.codes[rows], part.dictionaries)
    return EncodedTable.from_rows(list(columns), part.decode_rows())


def secure_loss(table: EncodedTable, hierarchies: dict[str, Hierarchy], config: AnonymizationConfig,
                transformation: dict[str, int], suppressed: np.ndarray) -> float:
    """The secure (= centralized) result's loss, by the same function as the baselines."""
    return recoded_loss(table, hierarchies, config, _uniform_levels(config, transformation, table.n_rows), suppressed)


def horizontal_baseline(table: EncodedTable, hierarchies: dict[str, Hierarchy], config: AnonymizationConfig,
                        row_groups: Sequence[Sequence[int]], secure: tuple[dict[str, int], np.ndarray]
                        ) -> BaselineResult:
    """Every party anonymizes its rows alone (same model and suppression fraction); results appended."""
    _check_supported(config)
    n, qis = table.n_rows, list(config.quasi_identifiers)
    levels = np.zeros((n, len(qis)), dtype=np.int64)
    suppressed = np.zeros(n, dtype=bool)
    seen = np.zeros(n, dtype=np.int64)
    per_party = []
    for party, group in enumerate(row_groups, start=1):
        rows = np.asarray(group, dtype=np.int64)
        seen[rows] += 1
        share = _sub_table(table, rows, table.columns)
        try:
            result = anonymize(share, hierarchies, config)
        except NoSolutionError as exc:
            raise NoSolutionError(f"baseline: party {party} alone cannot satisfy the model: {exc}") from None
        levels[rows] = [result.transformation[q] for q in qis]
        suppressed[rows] = result.suppressed
        per_party.append({"party": party, "rows": int(len(rows)), "transformation": result.transformation,
                          "suppressed_rows": result.suppressed_rows})
    if (seen != 1).any():
        raise InputError("the row groups of a horizontal baseline must cover every row exactly once")
    baseline = recoded_loss(table, hierarchies, config, levels, suppressed)
    return BaselineResult("horizontal", len(row_groups), config.metric,
                          secure_loss(table, hierarchies, config, *secure), baseline, int(suppressed.sum()),
                          {"party_results": per_party}, levels, suppressed)


def lowest_class_preserving_level(qi_codes: Sequence[np.ndarray], classes: np.ndarray) -> int:
    """Lowest level whose codes are constant inside every class (`classes`: class id per kept row)."""
    for level, codes in enumerate(qi_codes):
        pairs = np.unique(np.stack([classes, codes], axis=1), axis=0)
        if len(pairs) == len(np.unique(classes)):
            return level
    return len(qi_codes) - 1


def vertical_baseline(table: EncodedTable, hierarchies: dict[str, Hierarchy], config: AnonymizationConfig,
                      column_groups: Sequence[Sequence[str]], secure: tuple[dict[str, int], np.ndarray]
                      ) -> BaselineResult:
    """One party anonymizes its columns, the others keep its classes; the best such party is kept."""
    _check_supported(config)
    qis = list(config.quasi_identifiers)
    sensitive = config.sensitive_attributes
    info = {q: _QiLevels(table, q, hierarchies[q]) for q in qis}  # shared by every candidate
    candidates = []
    for party, group in enumerate(column_groups, start=1):
        own = [q for q in qis if q in group]
        if not own:
            continue
        sub_config = AnonymizationConfig.from_dict({**config.to_dict(), "quasi_identifiers": own})
        share = _sub_table(table, None, own + [a for a in sensitive if a not in own])
        try:
            result = anonymize(share, {q: hierarchies[q] for q in own}, sub_config)
        except NoSolutionError:
            continue
        candidates.append(_keep_classes(info, config, party, own, result))
    if not candidates:
        raise NoSolutionError("baseline: no party can anonymize its own quasi-identifiers under the model")
    best = min(candidates, key=lambda c: c[0])
    baseline, levels_by_qi, suppressed, party = best
    return BaselineResult("vertical", len(column_groups), config.metric,
                          secure_loss(table, hierarchies, config, *secure), baseline, int(suppressed.sum()),
                          {"anonymizing_party": party, "baseline_transformation": levels_by_qi,
                           "candidate_losses": {f"p{c[3]}": c[0] for c in candidates}},
                          _uniform_levels(config, levels_by_qi, table.n_rows), suppressed)


def _keep_classes(info: dict[str, _QiLevels], config: AnonymizationConfig, party: int, own: list[str],
                  result: AnonymizationResult) -> tuple[float, dict[str, int], np.ndarray, int]:
    """Generalize the other parties' QIs just enough to keep `result`'s classes intact."""
    qis = list(config.quasi_identifiers)
    suppressed = np.asarray(result.suppressed, dtype=bool)
    kept = ~suppressed
    out_codes = result.output.codes[:, [result.output.column_index(q) for q in own]]
    _, class_ids = np.unique(out_codes[kept], axis=0, return_inverse=True)
    class_ids = class_ids.reshape(-1)
    levels_by_qi = {}
    for q in qis:
        if q in own:
            levels_by_qi[q] = int(result.transformation[q])
            continue
        levels_by_qi[q] = lowest_class_preserving_level([c[kept] for c in info[q].codes], class_ids)
    n = len(suppressed)
    loss = _loss_of([info[q] for q in qis], config.metric, n, _uniform_levels(config, levels_by_qi, n), suppressed)
    return loss, levels_by_qi, suppressed, party


def hybrid_baseline(table: EncodedTable, hierarchies: dict[str, Hierarchy], config: AnonymizationConfig,
                    groups: Sequence[tuple[Sequence[str], Sequence[Sequence[int]]]],
                    secure: tuple[dict[str, int], np.ndarray]) -> BaselineResult:
    """Hybrid layouts, on the joined `table`: the parties of one column group each anonymize their
    own persons on the group's quasi-identifiers (as horizontally), the other groups generalize
    theirs just enough to keep those classes (as vertically); the best group is kept.

    `groups`: per column group, its columns and each of its parties' rows of `table`. With one
    group this is the horizontal baseline, with one party per group the vertical one.
    """
    _check_supported(config)
    qis = list(config.quasi_identifiers)
    sensitive = config.sensitive_attributes
    info = {q: _QiLevels(table, q, hierarchies[q]) for q in qis}
    n = table.n_rows
    candidates = []
    for group, (columns, row_groups) in enumerate(groups, start=1):
        own = [q for q in qis if q in columns]
        if not own:
            continue
        sub_config = AnonymizationConfig.from_dict({**config.to_dict(), "quasi_identifiers": own})
        levels = np.zeros((n, len(qis)), dtype=np.int64)
        suppressed = np.zeros(n, dtype=bool)
        classes = np.zeros(n, dtype=np.int64)  # class id per row: classes never span two parties
        seen = np.zeros(n, dtype=np.int64)
        next_id, per_party, feasible = 0, [], True
        for rows in row_groups:
            rows = np.asarray(rows, dtype=np.int64)
            if not len(rows):
                continue
            seen[rows] += 1
            share = _sub_table(table, rows, own + [a for a in sensitive if a not in own])
            try:
                result = anonymize(share, {q: hierarchies[q] for q in own}, sub_config)
            except NoSolutionError:
                feasible = False
                break
            for i, q in enumerate(qis):
                if q in own:
                    levels[rows, i] = int(result.transformation[q])
            suppressed[rows] = np.asarray(result.suppressed, dtype=bool)
            out_codes = result.output.codes[:, [result.output.column_index(q) for q in own]]
            _, ids = np.unique(out_codes, axis=0, return_inverse=True)
            ids = ids.reshape(-1)
            classes[rows] = ids + next_id
            next_id += int(ids.max()) + 1 if len(ids) else 0
            per_party.append({"rows": int(len(rows)), "transformation": result.transformation,
                              "suppressed_rows": result.suppressed_rows})
        if not feasible:
            continue
        if (seen != 1).any():
            raise InputError(f"the row groups of column group {group} must cover every joined row exactly once")
        kept = ~suppressed
        for i, q in enumerate(qis):
            if q not in own:
                levels[:, i] = lowest_class_preserving_level([c[kept] for c in info[q].codes], classes[kept])
        loss = _loss_of([info[q] for q in qis], config.metric, n, levels, suppressed)
        candidates.append((loss, group, levels, suppressed, per_party))
    if not candidates:
        raise NoSolutionError("baseline: no column group's parties can anonymize their own persons under the model")
    loss, group, levels, suppressed, per_party = min(candidates, key=lambda c: c[0])
    return BaselineResult("hybrid", sum(len(rows) for _, rows in groups), config.metric,
                          secure_loss(table, hierarchies, config, *secure), loss, int(suppressed.sum()),
                          {"anonymizing_group": group, "party_results": per_party,
                           "candidate_losses": {f"group {c[1]}": c[0] for c in candidates}},
                          levels, suppressed)
