"""SafePub: an (ε, δ)-differentially private release of one table (Bild, Kuhn, Prasser, PoPETs 2018).

1. Sample: every row is kept independently with probability β = 1 - e^(-ε_anon).
2. Search: starting at the lattice's top (every QI fully generalized), each of `steps` draws
   adds the direct specializations of the current transformation to a candidate set, removes
   the current one, and draws the next from the candidates with the exponential mechanism at
   ε_search / steps. The release uses the best-scoring transformation among those drawn
   (the top included), as SafePub's reference implementation in ARX does, or -- with
   `final = "last"` -- the last one drawn, which is a function of the draws alone.
3. Anonymize: generalize the sample with that transformation and suppress every class
   smaller than the derived k (no suppression limit: the guarantee needs every small class
   suppressed, whatever their number).

The score is SafePub's granularity score, of sensitivity 1 by construction: the loss of the
full table with every row that is not sampled or is suppressed charged 1 per QI, and every
released cell its Iyengar loss fraction, divided by |QI|·max(k-1, 1) and negated. Adding one
row changes that loss by at most |QI|·max(k-1, 1): the row's own cells (at most |QI|), or a
class of k-1 sampled rows reaching k and releasing k-1 rows that were charged |QI| each.

The scores are computed on the sample only; nothing about a row that is not sampled reaches
the output except the count of such rows, which the score charges uniformly.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.dp.accounting import Ledger
from fedanon.dp.parameters import SafePubParameters
from fedanon.dp.randomness import Randomness, randomness as make_randomness
from fedanon.engine.anonymizer import LossFractions, generalize, local_statistics, prepare_structure
from fedanon.engine.check.grouping import Grouper
from fedanon.engine.result import AnonymizationResult
from fedanon.model.config import AnonymizationConfig
from fedanon.model.metrics.registry import build_metric

ALGORITHM = "SafePub (exponential mechanism over the lattice)"
SELECTION = "exponential mechanism (OpenDP Gumbel noisy-max)"
SAMPLING = "Bernoulli row sampling (OS CSPRNG) + k-anonymity with suppression"


@dataclass
class SearchTrace:
    """The transformations the search drew, in order, and the one it released."""

    drawn: list[tuple[int, ...]]
    chosen: tuple[int, ...]
    chosen_score: float
    scored: int          # transformations whose score was computed (candidates seen)
    steps_taken: int     # draws made (fewer than `steps` when the candidates run out)


class GranularityScore:
    """SafePub's granularity score of a transformation on the sample (sensitivity 1).

    `n_rows` is the number of rows charged |QI| each when not released. SafePub charges every
    input row; the rows that are not sampled cost the same under every transformation, so
    charging only the sample's rows (what a protocol's search party sees) shifts every score
    by one constant and leaves the exponential mechanism's distribution unchanged. The sum is
    formed per generalized value and added with `math.fsum` (exactly rounded), so it does not
    depend on the order of classes or values: the same bits on plaintext and on ciphertext.
    """

    def __init__(self, grouper: Grouper, fractions: LossFractions, n_rows: int, k: int) -> None:
        self.grouper, self.fractions, self.n_rows, self.k = grouper, fractions, n_rows, k
        self.q = grouper.n_qis
        self.sensitivity_units = self.q * max(k - 1, 1)

    def loss(self, levels: tuple[int, ...]) -> float:
        """Σ over released cells of the loss fraction + |QI| per row not released."""
        classes, _ = self.grouper.classes(levels)
        sizes = np.asarray(classes.stats.sizes, dtype=np.int64)
        kept = sizes >= self.k
        released = int(sizes[kept].sum())
        terms = [float(self.q * (self.n_rows - released))]
        for i, level in enumerate(levels):
            fraction = self.fractions[i][level]
            rows_per_value = np.bincount(classes.codes[kept, i], weights=sizes[kept].astype(np.float64),
                                         minlength=fraction.shape[0])
            terms.extend((rows_per_value * fraction).tolist())
        return math.fsum(terms)

    def __call__(self, levels: tuple[int, ...]) -> float:
        return -self.loss(levels) / self.sensitivity_units


def specializations(levels: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Direct specializations: one QI one level lower."""
    return [levels[:i] + (l - 1,) + levels[i + 1:] for i, l in enumerate(levels) if l > 0]


def search(top: tuple[int, ...], score: Callable[[tuple[int, ...]], float], params: SafePubParameters,
           rng: Randomness, ledger: Ledger, progress: Callable[[int, int], None] | None = None,
           final: str = "best") -> SearchTrace:
    """The exponential-mechanism walk down from `top` (see the module text)."""
    scores: dict[tuple[int, ...], float] = {top: score(top)}
    candidates: dict[tuple[int, ...], float] = {top: scores[top]}
    pivot, drawn = top, []
    best, best_score = top, scores[top]
    steps_taken = 0
    for step in range(1, params.steps + 1):
        for node in specializations(pivot):
            if node not in scores:
                scores[node] = candidates[node] = score(node)
        candidates.pop(pivot, None)
        if not candidates:
            break
        nodes = list(candidates)
        pivot = nodes[rng.exponential_mechanism([candidates[n] for n in nodes], params.epsilon_per_step)]
        steps_taken = step
        drawn.append(pivot)
        if scores[pivot] > best_score or (scores[pivot] == best_score and sum(pivot) < sum(best)):
            best, best_score = pivot, scores[pivot]
        if progress is not None:
            progress(step, params.steps)
    if steps_taken:
        ledger.spend("transformation search", SELECTION if not rng.seeded else "exponential mechanism (seeded, tests only)",
                     params.epsilon_per_step * steps_taken, 0.0, steps=steps_taken,
                     epsilon_per_step=params.epsilon_per_step, score="granularity, sensitivity 1")
    if final == "last":
        best, best_score = pivot, scores[pivot]
    return SearchTrace(drawn, best, best_score, len(scores), steps_taken)


def release(
    table: EncodedTable,
    hierarchies: dict[str, Hierarchy],
    config: AnonymizationConfig,
    *,
    progress: Callable[[int, int], None] | None = None,
    rng: Randomness | None = None,
    rows: np.ndarray | None = None,
) -> AnonymizationResult:
    """Draw one SafePub release of `table` under the config's `dp` model.

    The result's `output` holds the sampled rows only (input order), `released` their input
    row numbers and `suppressed` which of them lost their QI cells; `extra["dp"]` states
    ε, δ, β, k, the budget split and what each part spent. `rows` gives the sample instead of
    drawing it (the seam that compares a protocol run, whose primaries sampled, with this).
    """
    start = time.perf_counter()
    model = _model(config)
    params = model.parameters()
    k = max(params.k, int(config.k))
    rng = rng or make_randomness(model.seed)
    # the whole table validates the inputs (hierarchy coverage names the input row); the
    # search and the output work on the sample alone, re-encoded to the values it holds
    kconfig = AnonymizationConfig(config.quasi_identifiers, k=k, suppression=0.0, metric=config.metric)
    prepare_structure(table, hierarchies, kconfig)
    if rows is None:
        rows = np.flatnonzero(rng.bernoulli(table.n_rows, params.beta))
    rows = np.asarray(rows, dtype=np.int64)
    result = release_sample(compact_rows(table, rows), hierarchies, config, rng=rng, progress=progress,
                            input_rows=table.n_rows)
    result.released = rows
    result.elapsed_s = time.perf_counter() - start
    return result


def _model(config: AnonymizationConfig) -> Any:
    model: Any = config.model("dp")
    if model is None:
        raise ValueError("a SafePub release needs a config with a dp model")
    config.ensure_valid()  # a no-op on a config validated where it entered
    return model


def release_sample(
    sample: EncodedTable,
    hierarchies: dict[str, Hierarchy],
    config: AnonymizationConfig,
    *,
    rng: Randomness,
    progress: Callable[[int, int], None] | None = None,
    input_rows: int | None = None,
) -> AnonymizationResult:
    """Steps 2 and 3 on a table that already is the sample: search, generalize, suppress.

    A protocol's search party calls this on the integrated table of the rows the primaries
    sampled (plaintext or ciphertext alike). `input_rows`, the number of rows before sampling,
    only enters the report (the granularity over the whole input); a search party that does not
    know it passes None and the report gives the granularity over the sample.
    """
    start = time.perf_counter()
    model = _model(config)
    params = model.parameters()
    k = max(params.k, int(config.k))
    kconfig = AnonymizationConfig(config.quasi_identifiers, k=k, suppression=0.0, metric=config.metric)
    ledger = Ledger()
    if sample.n_rows == 0:
        return _empty_release(sample, config, params, k, rng, ledger, start, hierarchies, input_rows)
    structure = prepare_structure(sample, hierarchies, kconfig)
    top = tuple(int(h) - 1 for h in structure.lattice.heights)
    grouper = structure.grouper
    scorer = GranularityScore(grouper, LossFractions(structure), sample.n_rows, k)
    trace = search(top, scorer, params, rng, ledger, progress, final=model.final)
    ledger.spend("row sample and k-anonymization", SAMPLING if not rng.seeded else "sampling (seeded, tests only)",
                 params.epsilon_anon, params.delta, beta=params.beta, k=k)
    levels = trace.chosen
    classes = grouper.group_rows(levels, keep_rows=True)
    sizes = np.asarray(classes.stats.sizes, dtype=np.int64)
    failing = sizes < k
    suppressed = failing[classes.row_class]
    output = generalize(structure, levels, suppressed)
    metric = build_metric(config.metric, local_statistics(structure).metric, config.metric_weights())
    loss = float(metric.loss(levels, classes, failing))
    charged = scorer.loss(levels)
    dp: dict[str, Any] = {
        **params.to_dict(), "k": k, "k_derived": params.k, "sampled_rows": int(sample.n_rows),
        "randomness": rng.name, "seeded": rng.seeded,
        "selection": "sampled by the exponential mechanism, not an optimum",
        "final": model.final,
        "score": "granularity (SafePub), sensitivity 1",
        "search": {"drawn": [list(d) for d in trace.drawn], "scored": trace.scored,
                   "steps_taken": trace.steps_taken, "chosen_score": trace.chosen_score},
        "budget": ledger.to_dict(),
    }
    if input_rows is not None:
        dp["input_rows"] = int(input_rows)
        # over the whole input: rows not released (not sampled or suppressed) count 1 per QI
        dp["granularity_loss"] = (charged + scorer.q * (input_rows - sample.n_rows)) / (input_rows * scorer.q)
    else:
        dp["granularity_loss_of_sample"] = charged / (sample.n_rows * scorer.q)
    return AnonymizationResult(
        transformation={q: int(l) for q, l in zip(config.quasi_identifiers, levels)},
        output=output,
        suppressed=suppressed,
        suppressed_rows=int(suppressed.sum()),
        information_loss=loss,
        metric=config.metric,
        classes=int((~failing).sum()),
        checks=trace.scored,
        rollups=grouper.rollups,
        elapsed_s=time.perf_counter() - start,
        lattice_size=structure.lattice.size,
        optimum_found=False,
        algorithm=ALGORITHM,
        extra={"dp": dp},
        released=np.arange(sample.n_rows, dtype=np.int64),
    )


def compact_rows(table: EncodedTable, rows: np.ndarray) -> EncodedTable:
    """The given rows, each column's dictionary cut to the values they hold (first-use order
    of the original dictionary), so that statistics of the sample see no empty values."""
    codes = np.empty((rows.size, len(table.columns)), dtype=np.int32, order="F")
    dictionaries = []
    for c, dictionary in enumerate(table.dictionaries):
        present, inverse = np.unique(table.codes[rows, c], return_inverse=True)
        codes[:, c] = inverse.reshape(-1)
        dictionaries.append([dictionary[int(v)] for v in present])
    return EncodedTable(list(table.columns), codes, dictionaries)


def _empty_release(sample: EncodedTable, config: AnonymizationConfig, params: SafePubParameters, k: int,
                   rng: Randomness, ledger: Ledger, start: float, hierarchies: dict[str, Hierarchy],
                   input_rows: int | None) -> AnonymizationResult:
    """No row was sampled: the release is empty (the search has nothing to score)."""
    ledger.spend("row sample and k-anonymization", SAMPLING, params.epsilon_anon, params.delta,
                 beta=params.beta, k=k)
    heights = [hierarchies[q].height for q in config.quasi_identifiers]
    lattice_size = int(np.prod(heights)) if heights else 1
    empty = EncodedTable(list(sample.columns), np.zeros((0, len(sample.columns)), dtype=np.int32),
                         [[] for _ in sample.columns])
    dp: dict[str, Any] = {**params.to_dict(), "k": k, "k_derived": params.k, "sampled_rows": 0,
                          "randomness": rng.name, "seeded": rng.seeded,
                          "selection": "no row sampled: empty release", "budget": ledger.to_dict()}
    if input_rows is not None:
        dp["input_rows"] = int(input_rows)
    return AnonymizationResult(
        transformation={q: int(h) - 1 for q, h in zip(config.quasi_identifiers, heights)}, output=empty,
        suppressed=np.zeros(0, dtype=bool), suppressed_rows=0, information_loss=float("nan"),
        metric=config.metric, classes=0, checks=0, rollups=0, elapsed_s=time.perf_counter() - start,
        lattice_size=lattice_size, optimum_found=False, algorithm=ALGORITHM, extra={"dp": dp},
        released=np.zeros(0, dtype=np.int64))


def sampled_view(table: EncodedTable, config: AnonymizationConfig,
                 result: AnonymizationResult) -> tuple[EncodedTable, AnonymizationConfig]:
    """The released rows of `table` and the k-anonymity config they were anonymized with, so
    that risk and utility reports judge the release, not the unsampled input."""
    rows = result.released if result.released is not None else np.arange(table.n_rows)
    sample = compact_rows(table, rows)
    k = int(result.extra.get("dp", {}).get("k", config.k))
    return sample, AnonymizationConfig(config.quasi_identifiers, k=k, suppression=0.0, metric=config.metric)
