"""k-map (Sweeney): against a population table, or with the population estimated from the
sampling fraction.

**With a population table** (`--k-map-population K:SAMPLE.csv`, as δ-presence takes it): the
input is the population, SAMPLE.csv marks the rows that are released (the research subset).
Classes are formed over the population; a class holding released rows must hold at least K
population rows (a class without released rows publishes nothing and is not judged, as for
δ-presence). Monotone without suppression: a union holding released rows contains a part that
holds them, and that part alone has K rows. Not with suppression: a class is suppressed with
all its population rows, so a failing coarse class can take along rows of finer classes that
passed because they held no released rows; the criterion says so.

**Estimated** (`--k-map K:N[...]`), the rest of this docstring:

k-map asks that every released record match at least k individuals of the *population* the
data were sampled from, not only k records of the sample (k-anonymity). Without a population
table the population size of a class is unknown; following El Emam & Dankar ("Protecting
privacy using k-anonymity", JAMIA 15(5), 2008), who build on Pannekoek ("Statistical methods
for some simple disclosure limitation rules", Statistica Neerlandica 53(1), 1999), the model
turns k-map into k'-anonymity of the sample with a k' derived from the sampling fraction:

    π = n / N      (n rows in the data, N individuals in the population, N ≥ n)

A population class of F individuals shows up in a sample drawn with fraction π with a size
that is approximately Poisson distributed with mean π·F. Take the boundary case F = k, λ = π·k,
and a significance level α:

* estimator `poisson` (Pannekoek's D3): X ~ Poisson(λ), P(X = j) = e^{−λ} λ^j / j!;
* estimator `zero-truncated` (El Emam & Dankar's D4): X ~ Poisson(λ) conditioned on X ≥ 1
  (a released class is never empty), P(X = j) = e^{−λ} λ^j / (j! (1 − e^{−λ})), j ≥ 1.

    k' = min( k, n, 1 + min{ c : P(X ≤ c) ≥ 1 − α } )

i.e. the smallest class size s whose upper tail P(X ≥ s) is at most α: a sample class of at
least k' rows is, at level α, unlikely to come from a population class of k or fewer. Every
class then needs at least k' rows (k' ≤ k: a sample class of k rows always maps to ≥ k people).
ARX 3.9.2 (`KMap` with a population model) uses the same rule for the zero-truncated
estimator; for the Poisson estimator it answers one more than this k' (until the cap k), so its
optima can be coarser there.

Monotonicity: the judged condition is k'-anonymity, monotone also with suppression (a class of
a generalization fails only if all its parts fail).

What each party learns in the protocols: with a population table, the checking party learns per
class the population count and the released count, exactly as for δ-presence (the research
subset comes from the parties' subset column; no party sends another its sample file). With the
estimate, it needs the class sizes, exactly as for k-anonymity (A: the master; B: the helper; C: the key holder). The population size N and α
are parameters of the config every party receives; k' follows from them and the row count,
which every protocol already shares. Nothing else is revealed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from fedanon.errors import InputError
from fedanon.model.criterion import Criterion, CriterionContext
from fedanon.model.registry import ClassView, ParseContext, PrivacyModel, number, register, table_value
from fedanon.stats.classes import ClassStats

ESTIMATORS = ("poisson", "zero-truncated")
DEFAULT_ALPHA = 0.01


@register
@dataclass
class KMap(PrivacyModel):
    """k-map against a population of N, estimated: `--k-map K:N[:poisson|zero-truncated[:ALPHA]]`."""

    k: int
    population: int
    estimator: Literal["poisson", "zero-truncated"] = "poisson"
    significance: float = DEFAULT_ALPHA

    key = "k_map"
    flag = "--k-map"
    metavar = "K:N[:poisson|zero-truncated[:ALPHA]]"
    help = ("k-map: every released record matches at least K of a population of N individuals, estimated "
            f"from the sampling fraction (Poisson or zero-truncated Poisson, significance ALPHA, "
            f"default {DEFAULT_ALPHA})")
    decomposes_over_shares = False   # k' depends on the whole table's row count

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "KMap":
        if isinstance(value, str):
            parts = [p.strip() for p in value.split(":")]
            what = f"{cls.flag} {value!r}"
            if not 2 <= len(parts) <= 4:
                raise InputError(f"{what}: expected K:N[:poisson|zero-truncated[:ALPHA]]")
            estimator = parts[2].lower() if len(parts) > 2 else "poisson"
            alpha = number(parts[3], what + ": alpha") if len(parts) > 3 else DEFAULT_ALPHA
            return cls(_integer(parts[0], what + ": k"), _integer(parts[1], what + ": population"),
                       estimator, alpha)  # type: ignore[arg-type]
        entries = table_value(value, cls.key, ("k", "population", "estimator", "significance"), ctx)
        if not {"k", "population"} <= set(entries):
            raise InputError(f"{ctx.source}: [{cls.key}] needs k and population (and optionally estimator, "
                             "significance)")
        return cls(_integer(entries["k"], f"[{cls.key}] k"), _integer(entries["population"], f"[{cls.key}] population"),
                   str(entries.get("estimator", "poisson")).lower(),  # type: ignore[arg-type]
                   number(entries.get("significance", DEFAULT_ALPHA), f"[{cls.key}] significance"))

    def validate(self, config: Any) -> None:
        if self.estimator not in ESTIMATORS:
            raise InputError(f"unknown k-map estimator {self.estimator!r} (poisson, zero-truncated)")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise InputError(f"k-map needs an integer k >= 1, got {self.k!r}")
        if isinstance(self.population, bool) or not isinstance(self.population, int) or self.population < 1:
            raise InputError(f"k-map needs a population size N >= 1, got {self.population!r}")
        if not (math.isfinite(self.significance) and 0 < self.significance < 1):
            raise InputError(f"k-map needs a significance level in (0, 1), got {self.significance!r}")

    def criterion(self) -> "KMapCriterion":
        return KMapCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        # the definition again, as a plain loop over the distribution's terms
        n, lam = view.table_rows, view.table_rows / self.population * self.k
        p0 = math.exp(-lam)
        cumulative, term, c = 0.0, p0, 0
        scale = 1.0 if self.estimator == "poisson" else 1.0 / (1.0 - p0)
        if self.estimator == "poisson":
            cumulative = p0
        while cumulative < 1.0 - self.significance and c + 1 < self.k:
            c += 1
            term = term * lam / c
            cumulative += term * scale
        needed = min(self.k, n, c + 1)
        if view.size < needed:
            return f"{view.size} rows < k'={needed} (k-map with k={self.k}, N={self.population})"
        return None

    def describe(self) -> str:
        return f"{self.k}-map of a population of {self.population} ({self.estimator}, alpha={self.significance:g})"


def _integer(value: Any, what: str) -> int:
    x = number(value, what)
    if not math.isfinite(x) or x != int(x):
        raise InputError(f"{what}: {value!r} is not an integer")
    return int(x)


def derived_k(k: int, n: int, population: int, estimator: str, alpha: float) -> int:
    """k' = min(k, n, 1 + the smallest c with P(X ≤ c) ≥ 1 − α), X as the module docstring says.
    The probabilities are summed in log space (λ may be large for big k and fractions)."""
    lam = n / population * k
    j = np.arange(0, max(k, 1) + 1, dtype=np.float64)
    log_pmf = -lam + j * math.log(lam) - np.array([math.lgamma(x + 1) for x in j]) if lam > 0 else \
        np.where(j == 0, 0.0, -np.inf)
    pmf = np.exp(log_pmf)
    if estimator == "zero-truncated":
        pmf[0] = 0.0
        pmf /= -math.expm1(-lam)
    reached = np.flatnonzero(np.cumsum(pmf) >= 1.0 - alpha)
    first = int(reached[0]) if reached.shape[0] else k
    return max(1, min(k, n, first + 1))


class KMapCriterion(Criterion):
    """k'-anonymity with k' derived in `prepare` from the row count and the population size."""

    monotone = True
    monotone_with_suppression = True

    def __init__(self, model: KMap) -> None:
        self.model = model
        self.min_class_size = int(model.k)

    def prepare(self, context: CriterionContext) -> None:
        n = int(context.n_rows)
        if self.model.population < n:
            raise InputError(f"k-map: the population ({self.model.population}) is smaller than the data ({n} rows)")
        self.min_class_size = derived_k(self.model.k, n, self.model.population, self.model.estimator,
                                        self.model.significance)

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        return np.asarray(stats.sizes) >= self.min_class_size

    def describe(self) -> str:
        return f"{self.model.describe()} as {self.min_class_size}-anonymity"


@register
@dataclass
class KMapPopulation(PrivacyModel):
    """k-map against the population table (the input); the sample file marks the released rows:
    `--k-map-population K:SAMPLE.csv`. The file stays with the party that reads it."""

    k: int

    key = "k_map_population"
    flag = "--k-map-population"
    metavar = "K:SAMPLE.csv"
    help = ("k-map against the input as the population: every class holding rows of SAMPLE.csv (the released "
            "rows) holds at least K input rows")
    needs_subset = True

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "KMapPopulation":
        if isinstance(value, str):
            k, sep, path = value.partition(":")
            if not sep or not path.strip():
                raise InputError(f"{cls.flag} {value!r}: expected K:SAMPLE.csv")
            ctx.files["subset"] = ctx.resolve(path.strip())
            return cls(_integer(k, f"{cls.flag} {value!r}: k"))
        entries = table_value(value, cls.key, ("k", "subset"), ctx)
        if not {"k", "subset"} <= set(entries):
            raise InputError(f"{ctx.source}: [{cls.key}] needs k and subset")
        ctx.files["subset"] = ctx.resolve(str(entries["subset"]))
        return cls(_integer(entries["k"], f"[{cls.key}] k"))

    def validate(self, config: Any) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise InputError(f"k-map needs an integer k >= 1, got {self.k!r}")

    def criterion(self) -> "KMapPopulationCriterion":
        return KMapPopulationCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        if view.subset_rows and view.size < self.k:
            return f"{view.subset_rows} released rows match only {view.size} people of the population < k={self.k}"
        return None

    def describe(self) -> str:
        return f"{self.k}-map against the population table"


class KMapPopulationCriterion(Criterion):
    """Per class: no released rows, or at least k population rows."""

    monotone = True
    monotone_with_suppression = False
    needs_subset = True

    def __init__(self, model: KMapPopulation) -> None:
        self.model = model
        self.k = int(model.k)

    def prepare(self, context: CriterionContext) -> None:
        if context.subset_total is None:
            raise InputError("k-map against a population needs the sample (which rows of the input are released)")

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        if stats.subset_sizes is None:
            raise InputError("k-map against a population needs per-class sample counts")
        return (np.asarray(stats.sizes) >= self.k) | (np.asarray(stats.subset_sizes) == 0)

    def describe(self) -> str:
        return self.model.describe()
