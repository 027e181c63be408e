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


def granularity_loss(sizes: np.ndarray, fractions: np.ndarray, n_rows: int, k: int) -> float:
    """SafePub's charged loss of one transformation from its classes alone.

    `sizes[c]` is class c's number of (sampled) rows, `fractions[c, i]` the Iyengar loss fraction
    of the class's generalized value of QI i. Every row not released (suppressed, or among the
    `n_rows` charged but in no kept class) costs |QI|; every released cell its fraction. The
    terms are one per (kept class, QI), added with `math.fsum` (exactly rounded): the result
    depends on the multiset of classes only, never on their order -- so a party that sees the
    classes in a random order (Protocol C's key holder) computes the same bits as the local
    release. Classes of size 0 add nothing.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    fractions = np.asarray(fractions, dtype=np.float64).reshape(sizes.shape[0], -1)
    kept = sizes >= k
    q = fractions.shape[1]
    released = int(sizes[kept].sum())
    cells = sizes[kept].astype(np.float64)[:, None] * fractions[kept]
    return math.fsum([float(q * (n_rows - released)), *cells.ravel().tolist()])


def granularity_score(loss: float, n_qis: int, k: int) -> float:
    """The score of a charged loss: divided by |QI|·max(k-1, 1), the most one row changes it
    (sensitivity 1), and negated (the mechanism prefers high scores)."""
    return -loss / (n_qis * max(k - 1, 1))


class GranularityScore:
    """SafePub's granularity score of a transformation on the sample (sensitivity 1).

    `n_rows` is the number of rows charged |QI| each when not released. SafePub charges every
    input row; the rows that are not sampled cost the same under every transformation, so
    charging only the sample's rows (what a protocol's search party sees) shifts every score
    by one constant and leaves the exponential mechanism's distribution unchanged. The loss is
    `granularity_loss` of the node's classes, so it does not depend on the order of classes:
    the same bits on plaintext, on ciphertext and at a party that sees the classes permuted.
    """

    def __init__(self, grouper: Grouper, fractions: LossFractions, n_rows: int, k: int) -> None:
        self.grouper, self.fractions, self.n_rows, self.k = grouper, fractions, n_rows, k
        self.q = grouper.n_qis
        self.sensitivity_units = self.q * max(k - 1, 1)

    def loss(self, levels: tuple[int, ...]) -> float:
        """Σ over released cells of the loss fraction + |QI| per row not released."""
        classes, _ = self.grouper.classes(levels)
        sizes = np.asarray(classes.stats.sizes, dtype=np.int64)
        fractions = np.empty((sizes.shape[0], self.q), dtype=np.float64)
        for i, level in enumerate(levels):
            fractions[:, i] = self.fractions[i][level][np.asarray(classes.codes[:, i], dtype=np.int64)]
        return granularity_loss(sizes, fractions, self.n_rows, self.k)

    def __call__(self, levels: tuple[int, ...]) -> float:
        return granularity_score(self.loss(levels), self.q, self.k)


def specializations(levels: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Direct specializations: one QI one level lower."""
    return [levels[:i] + (l - 1,) + levels[i + 1:] for i, l in enumerate(levels) if l > 0]


#: Scores of candidate transformations, asked for in batches: `(pivot, nodes) -> scores`, where
#: `nodes` are the not yet scored direct specializations of the transformation just drawn
#: (`pivot`; None for the start, the lattice's top alone). A batch lets a protocol score one
#: step's candidates in one round trip; the local release scores them one by one.
BatchScores = Callable[[tuple[int, ...] | None, list[tuple[int, ...]]], list[float]]


def one_by_one(score: Callable[[tuple[int, ...]], float]) -> BatchScores:
    """A per-node score as a batch scorer."""
    return lambda _pivot, nodes: [score(node) for node in nodes]


def search(top: tuple[int, ...], score: BatchScores, params: SafePubParameters,
           rng: Randomness, ledger: Ledger, progress: Callable[[int, int], None] | None = None,
           final: str = "best") -> SearchTrace:
    """The exponential-mechanism walk down from `top` (see the module text); whoever calls it
    holds the scores and draws."""
    scores: dict[tuple[int, ...], float] = {top: _one(score(None, [top]))}
    candidates: dict[tuple[int, ...], float] = {top: scores[top]}
    pivot, drawn = top, []
    best, best_score = top, scores[top]
    steps_taken = 0
    for step in range(1, params.steps + 1):
        new = [node for node in specializations(pivot) if node not in scores]
        if new:
            got = score(pivot, new)
            if len(got) != len(new):
                raise ValueError(f"{len(got)} scores for {len(new)} candidates")
            for node, value in zip(new, got):
                scores[node] = candidates[node] = float(value)
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


def _one(scores: list[float]) -> float:
    if len(scores) != 1:
        raise ValueError(f"{len(scores)} scores for the one start transformation")
    return float(scores[0])


def spend_anonymization(ledger: Ledger, params: SafePubParameters, k: int, rng: Randomness) -> None:
    """The ledger entry of the sampling and the k-anonymization (ε_anon, δ)."""
    ledger.spend("row sample and k-anonymization", SAMPLING if not rng.seeded else "sampling (seeded, tests only)",
                 params.epsilon_anon, params.delta, beta=params.beta, k=k)


def describe(params: SafePubParameters, k: int, final: str, sampled_rows: int, rng: Randomness,
             trace: SearchTrace, ledger: Ledger) -> dict[str, Any]:
    """The report's `dp` entry: the parameters, the draws and what each part spent."""
    return {
        **params.to_dict(), "k": k, "k_derived": params.k, "sampled_rows": int(sampled_rows),
        "randomness": rng.name, "seeded": rng.seeded,
        "selection": "sampled by the exponential mechanism, not an optimum",
        "final": final,
        "score": "granularity (SafePub), sensitivity 1",
        "search": {"drawn": [list(d) for d in trace.drawn], "scored": trace.scored,
                   "steps_taken": trace.steps_taken, "chosen_score": trace.chosen_score},
        "budget": ledger.to_dict(),
    }


def release_k(config: AnonymizationConfig) -> int:
    """The k a release suppresses below: the derived k, or the config's k where larger."""
    return max(_model(config).parameters().k, int(config.k))


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
    trace = search(top, one_by_one(scorer), params, rng, ledger, progress, final=model.final)
    spend_anonymization(ledger, params, k, rng)
    levels = trace.chosen
    classes = grouper.group_rows(levels, keep_rows=True)
    sizes = np.asarray(classes.stats.sizes, dtype=np.int64)
    failing = sizes < k
    suppressed = failing[classes.row_class]
    output = generalize(structure, levels, suppressed)
    metric = build_metric(config.metric, local_statistics(structure).metric, config.metric_weights())
    loss = float(metric.loss(levels, classes, failing))
    charged = scorer.loss(levels)
    dp = describe(params, k, model.final, sample.n_rows, rng, trace, ledger)
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
