"""Population uniqueness below a threshold, estimated with Pitman's, Zayatz's or the SNB model, or by Dankar's rule.

A record that is unique in the *population* on its quasi-identifiers can be re-identified by
anyone who knows the person's values, sampled or not. The release is a sample of a population;
the model estimates the share of the population that is unique on the released
quasi-identifiers and asks that it be at most τ:

    Û / N ≤ τ,        N = n₀ / π   (n₀ input rows, π the sampling fraction given by the user)

**Estimator (Pitman's sampling formula, Hoshino 2001).** Hoshino, "Applying Pitman's sampling
formula to microdata disclosure risk assessment", Journal of Official Statistics 17(4),
499–520, 2001. The released classes are taken as a random partition of the n released records
under Pitman's two-parameter model (θ > −α, 0 ≤ α < 1). With u classes and f_j classes of size j,
its log-likelihood is, up to a constant,

    L(θ, α) = Σ_{i=1}^{u−1} ln(θ + iα) − Σ_{i=1}^{n−1} ln(θ + i) + Σ_j f_j Σ_{k=1}^{j−1} ln(k − α),

(θ̂, α̂) maximize it, and the expected number of population uniques of a population of N is

    Û = Γ(θ̂ + 1) / Γ(θ̂ + α̂) · N^α̂        (at most N).

Here the maximum is found from the score equations: for a given α, ∂L/∂θ = 0 has one root in
θ > −α (Brent's method); α̂ is the root of ∂L/∂α at that θ in [0, 1), or 0 where the score is
not positive at α = 0 (Ewens's one-parameter model, for which the formula gives Û = θ̂).
As in ARX: a release without sample uniques (f₁ = 0) has Û = 0 and passes; a release whose
records are all sample uniques (u = n) has no interior maximum and is taken as Û = N.

**Estimator `zayatz`** (Zayatz, "Estimation of the number of unique population elements using a
sample", Proceedings of the Survey Research Methods Section, ASA, 1991, as ARX computes it): the
share of sample uniques that are population uniques is estimated with the sample's own class
sizes standing in for the population's, a class of size i being seen exactly once in a sample of
n drawn from N with the hypergeometric probability h_i = i · C(N − i, n − 1) / C(N, n):

    P(unique in the population | unique in the sample) = f₁ h₁ / Σ_i f_i h_i,     Û = f₁ · P / (n / N)

(real N through the Gamma function; h_i = 0 where n − 1 > N − i). Û = 0 without sample uniques.

**Estimator `snb`** (the slide negative binomial model, Chen & Keller-McNulty, "Estimation of
identification disclosure risk in microdata", Journal of Official Statistics 14(1), 1998; see
`fedanon.stats.snb` for the equations): population class sizes are one plus a negative
binomial count, the release a Bernoulli sample with fraction π; the parameters are fitted to the
numbers of sample classes of size 1 and 2 with K̂ population classes (Haas and Stokes's estimate),
and Û = K̂ β̂^α̂. It uses π itself, not n / N. Where its two equations have no root (always so
without a class of two) Û is Zayatz's estimate, as in ARX's decision rule; with several, the
largest Û is taken.

**Estimator `dankar`** (the decision rule of Dankar, El Emam, Neisa and Roffey, "Estimating the
re-identification risk of clinical data sets", BMC Medical Informatics and Decision Making 12:66,
2012, in the form ARX 3.9.2 applies it): π ≤ 0.1: Pitman's estimate; π > 0.1: the smaller of
Zayatz's and the SNB estimate, Zayatz's where SNB has no root. (ARX falls back to Zayatz also
where its Pitman solver fails; Pitman's estimate here always exists.)

**Where it does not hold.** The estimate is a property of the whole release, so the criterion is
release-level (`Criterion.release_level`): after the class-by-class models have named their
classes, if the kept classes estimate above τ, every kept class of one record (every sample
unique) is suppressed -- after which f₁ = 0 and the model holds. Taking all sample uniques
together keeps the answer independent of the classes' order (Protocol C's key holder sees
them permuted); ARX suppresses the smallest classes one by one (binary search) and may stop
with fewer of them suppressed, so its optimum can keep more rows.

**Not monotone**, with or without suppression: the estimate depends on the whole class-size
distribution through (θ̂, α̂), and merging classes can raise it (fewer, larger classes can make
α̂, and with it N^α̂, grow). The criterion declares `monotone = False`: Flash then tags nothing
from this model's answers and checks every node the loss bound does not prune (the two-phase,
bound-pruned full search); the optimum stays exact, the search checks more nodes.

**What each party learns**, per protocol: the estimate needs only the multiset of released class
sizes, exactly what a k-anonymity check reveals, plus τ and π, which are in the config every
party receives, and the row count, which every protocol already shares. A: the master judges
from the class sizes; B: the helper does; C: the key holder judges from the decrypted class
sizes in permuted order (the helper still sees no size). No histogram, no population table, no
further message.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import digamma, gammaln, zeta

from fedanon.errors import InputError
from fedanon.model.criterion import Criterion, CriterionContext
from fedanon.model.registry import ClassView, ParseContext, PrivacyModel, number, register, table_value
from fedanon.stats.classes import ClassStats
from fedanon.stats.snb import plain_snb_uniques, snb_uniques

ESTIMATORS = ("pitman", "zayatz", "snb", "dankar")
# Dankar et al.'s rule: Pitman's estimate up to this sampling fraction, SNB or Zayatz above
DANKAR_PITMAN_FRACTION = 0.1
EPS = 1e-9
# below this α the sums over the classes are added term by term (see `pitman_parameters`)
CLOSED_FORM_ALPHA = 1e-3
# the verifier's own estimate is found by another method: it may differ in the last digits
VERIFY_TOLERANCE = 1e-7
# Pitman's estimate from `pitman_newton` (parameters to about twelve digits, by another route
# than `pitman_parameters`) decides a release only where it is farther than this share of τ
# from τ: a difference in the parameters' last digits moves ln Û by about ten times as much
# (∂ ln Û/∂α = ln N − ψ(θ + α)), many orders of magnitude below it; nearer τ the exact
# estimate decides
ROUGH_MARGIN = 1e-3


@register
@dataclass
class PopulationUniqueness(PrivacyModel):
    """Estimated population uniqueness ≤ τ: `--population-uniqueness TAU:FRACTION[:ESTIMATOR]`."""

    threshold: float
    sampling_fraction: float
    estimator: str = "pitman"

    key = "population_uniqueness"
    flag = "--population-uniqueness"
    metavar = "TAU:FRACTION[:pitman|zayatz|snb|dankar]"
    help = ("population uniqueness at most TAU: the share of the population (input rows / FRACTION, the "
            "sampling fraction) estimated unique on the released quasi-identifiers (Pitman's model, "
            "Hoshino 2001, the default; Zayatz 1991; snb, the slide negative binomial model of Chen & "
            "Keller-McNulty 1998; or dankar, the rule of Dankar et al. 2012 that picks among them by the "
            "sampling fraction); sample uniques are suppressed where it does not hold")
    decomposes_over_shares = False   # an estimate over the whole release

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "PopulationUniqueness":
        if isinstance(value, str):
            parts = [p.strip() for p in value.split(":")]
            what = f"{cls.flag} {value!r}"
            if not 2 <= len(parts) <= 3:
                raise InputError(f"{what}: expected {cls.metavar}")
            estimator = parts[2].lower() if len(parts) == 3 else "pitman"
            return cls(number(parts[0], what + ": threshold"), number(parts[1], what + ": sampling fraction"),
                       estimator)
        entries = table_value(value, cls.key, ("threshold", "sampling_fraction", "estimator"), ctx)
        if not {"threshold", "sampling_fraction"} <= set(entries):
            raise InputError(f"{ctx.source}: [{cls.key}] needs threshold and sampling_fraction "
                             "(and optionally estimator)")
        return cls(number(entries["threshold"], f"[{cls.key}] threshold"),
                   number(entries["sampling_fraction"], f"[{cls.key}] sampling_fraction"),
                   str(entries.get("estimator", "pitman")).lower())

    def validate(self, config: Any) -> None:
        _check(self)

    def criterion(self) -> "PopulationUniquenessCriterion":
        return PopulationUniquenessCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        return None   # no single class fails: see release_violation

    def release_violation(self, class_sizes: list[int], table_rows: int = 0) -> str | None:
        """The definition again, in plain Python: the likelihood's two score equations solved by
        bisection over sums written out term by term (no code shared with the criterion)."""
        sizes = [int(s) for s in class_sizes if s > 0]
        if 1 not in sizes:
            return None
        population = table_rows / self.sampling_fraction
        if self.estimator == "zayatz":
            uniques = _plain_zayatz_uniques(sizes, population)
        elif self.estimator == "snb" or (self.estimator == "dankar"
                                         and self.sampling_fraction > DANKAR_PITMAN_FRACTION):
            snb = plain_snb_uniques(sizes, self.sampling_fraction)
            if snb is None:   # no root: Zayatz's estimate, as the criterion takes
                uniques = _plain_zayatz_uniques(sizes, population)
            elif self.estimator == "snb":
                uniques = snb
            else:
                uniques = min(snb, _plain_zayatz_uniques(sizes, population))
        else:   # pitman, or dankar at π ≤ 0.1
            uniques = _plain_pitman_uniques(sizes, population)
        share = min(uniques, population) / population
        if share > self.threshold + VERIFY_TOLERANCE * max(1.0, self.threshold):
            return (f"estimated population uniqueness {share:.6g} > {self.threshold:g} "
                    f"({self.estimator}, {sizes.count(1)} sample uniques, population {population:.6g})")
        return None

    def describe(self) -> str:
        return (f"population uniqueness <= {self.threshold:g} ({self.estimator}, "
                f"sampling fraction {self.sampling_fraction:g})")


def _check(model: PopulationUniqueness) -> None:
    if not (isinstance(model.threshold, (int, float)) and math.isfinite(model.threshold)
            and 0 < model.threshold <= 1):
        raise InputError(f"population uniqueness needs a threshold in (0, 1], got {model.threshold!r}")
    if not (isinstance(model.sampling_fraction, (int, float)) and math.isfinite(model.sampling_fraction)
            and 0 < model.sampling_fraction <= 1):
        raise InputError(f"population uniqueness needs a sampling fraction in (0, 1], got {model.sampling_fraction!r}")
    if model.estimator not in ESTIMATORS:
        raise InputError(f"unknown population-uniqueness estimator {model.estimator!r} ({', '.join(ESTIMATORS)})")


# ---------------------------------------------------------------------- the criterion's estimate
def trigamma(x: float) -> float:
    """ψ'(x) = ζ(2, x) (Hurwitz's zeta), x > 0."""
    return float(zeta(2.0, x))


def pitman_parameters(sizes: np.ndarray) -> tuple[float, float]:
    """(θ̂, α̂) maximizing Pitman's likelihood for classes of these sizes (some of size 1, not all)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    u, n = int(sizes.shape[0]), int(sizes.sum())
    steps = np.arange(1, u, dtype=np.float64)                         # i = 1 .. u−1
    # Σ_j f_j Σ_{k=1}^{j−1} g(k) = Σ_k (classes larger than k) g(k), k = 1 .. largest − 1
    larger = np.bincount(sizes, minlength=int(sizes.max()) + 1)[::-1].cumsum()[::-1]
    ks = np.arange(1, int(sizes.max()), dtype=np.float64)
    above = larger[2:].astype(np.float64)                             # classes of size > k

    def reciprocal_sum(theta: float, alpha: float) -> float:
        """Σ_{i<u} 1/(θ + iα): (ψ(θ/α + u) − ψ(θ/α + 1))/α in closed form, term by term where α
        is so small that the difference of the two ψ would lose digits."""
        if alpha == 0.0:
            return (u - 1) / theta
        if alpha < CLOSED_FORM_ALPHA:
            return float(np.sum(1.0 / (theta + steps * alpha)))
        x = theta / alpha
        return float(digamma(x + u) - digamma(x + 1.0)) / alpha

    def theta_score(theta: float, alpha: float) -> float:
        # Σ_{i<u} 1/(θ + iα) − Σ_{i<n} 1/(θ + i); the second sum is ψ(θ + n) − ψ(θ + 1)
        return reciprocal_sum(theta, alpha) - float(digamma(theta + n) - digamma(theta + 1.0))

    def best_theta(alpha: float) -> float:
        low = -alpha + 1e-12 * max(1.0, alpha)
        high = max(1.0, float(n))
        while theta_score(high, alpha) > 0:
            high *= 2.0
        return brentq(theta_score, low, high, args=(alpha,), xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)

    def alpha_score(alpha: float) -> float:
        theta = best_theta(alpha)
        # Σ_{i<u} i/(θ + iα) = ((u − 1) − θ·Σ_{i<u} 1/(θ + iα)) / α
        if alpha == 0.0:
            weighted = u * (u - 1) / (2.0 * theta)
        elif alpha < CLOSED_FORM_ALPHA:
            weighted = float(np.sum(steps / (theta + steps * alpha)))
        else:
            weighted = ((u - 1) - theta * reciprocal_sum(theta, alpha)) / alpha
        return weighted - float(np.sum(above / (ks - alpha)))

    top = 1.0 - 1e-9
    if alpha_score(0.0) <= 0.0:
        return best_theta(0.0), 0.0
    if alpha_score(top) >= 0.0:   # not seen: the (1 − α) terms dominate there; stay in the domain
        return best_theta(top), top
    alpha = brentq(alpha_score, 0.0, top, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    return best_theta(alpha), alpha


def pitman_uniques(sizes: np.ndarray, population: float, rough: bool = False) -> float:
    """Hoshino's estimate of the number of population uniques, Γ(θ̂+1)/Γ(θ̂+α̂)·N^α̂, at most N;
    0 without sample uniques, N when every record is one. `rough`: from `pitman_newton`'s
    parameters where it settles (see `ROUGH_MARGIN`)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    sizes = sizes[sizes > 0]
    if not np.any(sizes == 1):
        return 0.0
    if sizes.shape[0] == int(sizes.sum()):
        return float(population)
    found = pitman_newton(sizes) if rough else None
    theta, alpha = found if found is not None else pitman_parameters(sizes)
    log_uniques = gammaln(theta + 1.0) - gammaln(theta + alpha) + alpha * math.log(population)
    return float(min(math.exp(min(log_uniques, 700.0)), population))


def pitman_newton(sizes: np.ndarray, max_steps: int = 60) -> tuple[float, float] | None:
    """(θ̂, α̂) by Newton's method on Pitman's log-likelihood in both parameters at once, with
    the sums over the classes in closed form (ψ and ψ' = ζ(2, ·) of θ/α; term by term where
    α < CLOSED_FORM_ALPHA), a step halved until the likelihood grows where it is not concave:
    a few evaluations where `pitman_parameters` nests one root search in another. None where
    it does not settle inside 0 < α < 1, θ > −α (e.g. at α̂ = 0): the caller then solves the
    score equations one at a time."""
    sizes = np.asarray(sizes, dtype=np.int64)
    u, n = int(sizes.shape[0]), int(sizes.sum())
    largest = int(sizes.max())
    larger = np.bincount(sizes, minlength=largest + 1)[::-1].cumsum()[::-1]
    ks = np.arange(1, largest, dtype=np.float64)
    above = larger[2:].astype(np.float64)                             # classes of size > k
    steps = np.zeros(0)   # i = 1 .. u − 1 where a sum is taken term by term (`terms`)

    def terms() -> np.ndarray:
        """i = 1 .. u − 1, for the sums term by term (built where first needed)."""
        nonlocal steps
        if steps.shape[0] != u - 1:
            steps = np.arange(1, u, dtype=np.float64)
        return steps

    def class_sums(theta: float, alpha: float) -> tuple[float, float]:
        """Σ_{i<u} 1/(θ + iα) and Σ_{i<u} 1/(θ + iα)²."""
        if alpha < CLOSED_FORM_ALPHA:
            r = 1.0 / (theta + terms() * alpha)
            return float(r.sum()), float((r * r).sum())
        x = theta / alpha
        return ((digamma(x + u) - digamma(x + 1.0)) / alpha,
                (trigamma(x + 1.0) - trigamma(x + u)) / (alpha * alpha))

    def likelihood(theta: float, alpha: float) -> float:
        if alpha < CLOSED_FORM_ALPHA:
            first = float(np.log(theta + terms() * alpha).sum())
        else:   # Σ_{i<u} ln(θ + iα) = (u − 1) ln α + ln Γ(θ/α + u) − ln Γ(θ/α + 1)
            x = theta / alpha
            first = (u - 1) * math.log(alpha) + gammaln(x + u) - gammaln(x + 1.0)
        return first - (gammaln(theta + n) - gammaln(theta + 1.0)) + float((above * np.log(ks - alpha)).sum())

    theta, alpha = max(1.0, u / 10.0), 0.5
    current: float | None = None
    for _ in range(max_steps):
        s1, s2 = class_sums(theta, alpha)
        q = 1.0 / (ks - alpha)
        # the gradient and the Hessian; Σ i/(θ+iα)^m from Σ 1/(θ+iα)^m, since i = ((θ + iα) − θ)/α
        g_t = s1 - (digamma(theta + n) - digamma(theta + 1.0))
        g_a = ((u - 1) - theta * s1) / alpha - float((above * q).sum()) if alpha >= CLOSED_FORM_ALPHA else \
            float((terms() / (theta + terms() * alpha)).sum()) - float((above * q).sum())
        h_tt = (trigamma(theta + 1.0) - trigamma(theta + n)) - s2
        if alpha >= CLOSED_FORM_ALPHA:
            h_ta = -(s1 - theta * s2) / alpha
            h_aa = -((u - 1) - 2.0 * theta * s1 + theta * theta * s2) / (alpha * alpha) - float((above * q * q).sum())
        else:
            ir = terms() / (theta + terms() * alpha)
            h_ta = -float((ir / (theta + terms() * alpha)).sum())
            h_aa = -float((ir * ir).sum()) - float((above * q * q).sum())
        det = h_tt * h_aa - h_ta * h_ta
        concave = h_tt < 0 and det > 0
        if concave:
            d_t = -(h_aa * g_t - h_ta * g_a) / det
            d_a = -(h_tt * g_a - h_ta * g_t) / det
        else:   # up the gradient
            d_t, d_a = g_t, g_a
        if abs(d_t) <= 1e-12 * max(1.0, abs(theta)) and abs(d_a) <= 1e-12:
            theta, alpha = theta + d_t, alpha + d_a
            return (theta, alpha) if 0.0 < alpha < 1.0 and theta > -alpha else None
        if concave and 0.0 < alpha + d_a < 1.0 and theta + d_t > -(alpha + d_a):
            theta, alpha, current = theta + d_t, alpha + d_a, None
            continue
        if current is None:
            current = likelihood(theta, alpha)
        t = 1.0
        while True:
            nt, na = theta + t * d_t, alpha + t * d_a
            if 0.0 < na < 1.0 and nt > -na:
                value = likelihood(nt, na)
                if value >= current:
                    break
            t *= 0.5
            if t < 1e-12:
                return None
        theta, alpha, current = nt, na, value
    return None


def zayatz_uniques(sizes: np.ndarray, population: float) -> float:
    """Zayatz's estimate of the number of population uniques (see the module docstring), at most N."""
    sizes = np.asarray(sizes, dtype=np.int64)
    sizes = sizes[sizes > 0]
    singles = int(np.count_nonzero(sizes == 1))
    if singles == 0:
        return 0.0
    n = float(sizes.sum())
    values, counts = np.unique(sizes, return_counts=True)
    values = values.astype(np.float64)
    possible = population - values >= n - 1.0   # else the class cannot be seen exactly once

    def log_binomial(a: np.ndarray | float, b: float) -> np.ndarray:
        return gammaln(np.asarray(a) + 1.0) - gammaln(b + 1.0) - gammaln(np.asarray(a) - b + 1.0)

    log_h = np.full(values.shape[0], -np.inf)
    log_h[possible] = (np.log(values[possible]) + log_binomial(population - values[possible], n - 1.0)
                       - log_binomial(population, n))
    weights = counts * np.exp(log_h - log_h.max())
    conditional = float(weights[0] / weights.sum())   # values[0] == 1: the sample uniques' term
    return float(min(singles * conditional * population / n, population))


def population_snb_uniques(sizes: np.ndarray, population: float, fraction: float) -> float:
    """The SNB estimate (fedanon.stats.snb), at most N; Zayatz's where its equations have no root."""
    uniques = snb_uniques(sizes, fraction)
    if uniques is None:
        uniques = zayatz_uniques(sizes, population)
    return float(min(uniques, population))


def dankar_uniques(sizes: np.ndarray, population: float, fraction: float) -> float:
    """Dankar et al.'s rule (module docstring): Pitman's estimate for π ≤ 0.1, else the smaller of
    Zayatz's and SNB's (Zayatz's where SNB has no root), at most N."""
    if fraction <= DANKAR_PITMAN_FRACTION:
        return pitman_uniques(sizes, population)
    zayatz = zayatz_uniques(sizes, population)
    snb = snb_uniques(sizes, fraction)
    return float(min(zayatz if snb is None else min(snb, zayatz), population))


class PopulationUniquenessCriterion(Criterion):
    """Release-level: keep the release when its estimated population uniqueness is at most τ,
    else suppress every sample unique."""

    monotone = False
    monotone_with_suppression = False
    release_level = True

    def __init__(self, model: PopulationUniqueness) -> None:
        _check(model)
        self.model = model
        self.population: float | None = None

    def prepare(self, context: CriterionContext) -> None:
        self.population = context.n_rows / float(self.model.sampling_fraction)

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        return np.ones(np.asarray(stats.sizes).shape[0], dtype=bool)

    def share(self, sizes: np.ndarray) -> float:
        """The estimated population uniqueness of a release with these class sizes."""
        if self.population is None:
            raise RuntimeError("population uniqueness: prepare() was not called")
        if self.model.estimator == "snb":
            return population_snb_uniques(sizes, self.population, self.model.sampling_fraction) / self.population
        if self.model.estimator == "dankar":
            return dankar_uniques(sizes, self.population, self.model.sampling_fraction) / self.population
        estimate = zayatz_uniques if self.model.estimator == "zayatz" else pitman_uniques
        return estimate(sizes, self.population) / self.population

    def holds(self, sizes: np.ndarray) -> bool:
        """Whether the estimate is at most τ: Pitman's (also as Dankar's rule's at π ≤ 0.1) from
        the rough roots where that is far from τ (`ROUGH_MARGIN`), else the exact `share`."""
        bound = self.model.threshold + EPS
        pitman = self.model.estimator == "pitman" or (self.model.estimator == "dankar"
                                                      and self.model.sampling_fraction <= DANKAR_PITMAN_FRACTION)
        if pitman and self.population is not None:
            rough = pitman_uniques(sizes, self.population, rough=True) / self.population
            if abs(rough - bound) > ROUGH_MARGIN * bound:
                return rough <= bound
        return self.share(sizes) <= bound

    def enforce(self, sizes: np.ndarray, failing: np.ndarray) -> np.ndarray:
        sizes = np.asarray(sizes, dtype=np.int64)
        kept = ~failing & (sizes > 0)
        singles = kept & (sizes == 1)
        if not singles.any() or self.holds(sizes[kept]):
            return failing
        return failing | singles

    def describe(self) -> str:
        return self.model.describe()


# ---------------------------------------------------------------------- the verifier's estimate
def _plain_pitman_uniques(sizes: list[int], population: float) -> float:
    """Hoshino's estimate from the score equations solved by plain bisection (the verifier's)."""
    n, u = sum(sizes), len(sizes)
    if u == n:
        return population

    def d_theta(theta: float, alpha: float) -> float:
        return sum(1.0 / (theta + i * alpha) for i in range(1, u)) - sum(1.0 / (theta + i) for i in range(1, n))

    def theta_at(alpha: float) -> float:
        low, high = -alpha + 1e-12 * max(1.0, alpha), float(max(1, n))
        while d_theta(high, alpha) > 0:
            high *= 2.0
        while high - low > 1e-15 * max(1.0, abs(high)):
            mid = (low + high) / 2.0
            if mid in (low, high):
                break
            if d_theta(mid, alpha) > 0:
                low = mid
            else:
                high = mid
        return (low + high) / 2.0

    frequencies = Counter(sizes)

    def d_alpha(alpha: float) -> float:
        theta = theta_at(alpha)
        return (sum(i / (theta + i * alpha) for i in range(1, u))
                - sum(f * sum(1.0 / (k - alpha) for k in range(1, j)) for j, f in frequencies.items()))

    if d_alpha(0.0) <= 0.0:
        alpha = 0.0
    else:
        low, high = 0.0, 1.0 - 1e-9
        while high - low > 1e-15:
            mid = (low + high) / 2.0
            if d_alpha(mid) > 0:
                low = mid
            else:
                high = mid
        alpha = (low + high) / 2.0
    theta = theta_at(alpha)
    return math.exp(math.lgamma(theta + 1.0) - math.lgamma(theta + alpha) + alpha * math.log(population))


def _plain_zayatz_uniques(sizes: list[int], population: float) -> float:
    """Zayatz's estimate term by term (the verifier's): h_i as a product of ratios, no binomials."""
    n = sum(sizes)
    frequencies = Counter(sizes)

    def seen_once(i: int) -> float:
        # P(exactly 1 of i marked in n draws from N) = i · n/N · Π_{j<n−1} (N − i − j)/(N − 1 − j)
        if population - i < n - 1:
            return 0.0
        p = i * n / population
        for j in range(n - 1):
            p *= (population - i - j) / (population - 1 - j)
        return p

    total = sum(f * seen_once(i) for i, f in frequencies.items())
    return frequencies[1] * (frequencies[1] * seen_once(1) / total) * population / n
