"""The slide negative binomial (SNB) estimate of population uniques (Chen & Keller-McNulty 1998).

Chen and Keller-McNulty, "Estimation of identification disclosure risk in microdata", Journal
of Official Statistics 14(1), 79–95, 1998; evaluated for clinical data, with the notation used
here, by Dankar, El Emam, Neisa and Roffey, "Estimating the re-identification risk of clinical
data sets", BMC Medical Informatics and Decision Making 12:66, 2012 (appendix A).

**Model.** The population has K non-empty classes. Each class size F is one plus a negative
binomial count -- "slid" by one so that no population class is empty:

    P(F = m) = Γ(m − 1 + α) / (Γ(α) (m − 1)!) · β^α (1 − β)^(m−1),   m ≥ 1,  α > 0, 0 < β < 1,

and the release is a Bernoulli sample with fraction π, so a class of F keeps f ~ Binomial(F, π)
rows. From the generating function of F − 1, (β / (1 − (1 − β)s))^α, with d = (1 − π)(1 − β),
the expected numbers of sample classes of size 1 and 2 are

    E[s₁] = K π β^α (1 − d)^(−α−1) (1 − d + α d),
    E[s₂] = K π² α (1 − β) β^α (2 − (1 − α) d) / (2 (1 − d)^(α+2)),

and the number of population uniques is K · P(F = 1) = K β^α.

**Estimate.** K is estimated from the sample's class-size frequencies f_i with Haas and
Stokes's Shlosser-type estimator ("Estimating the number of classes in a finite population",
JASA 93, 1998), q = π:

    K̂ = u + f₁ · Σ_i i q² (1 − q²)^(i−1) f_i / Σ_i (1 − q)^i ((1 + q)^i − 1) f_i
              · (Σ_i (1 − q)^i f_i / Σ_i i q (1 − q)^(i−1) f_i)²

(u released classes). (α̂, β̂) solve E[s₁] = s₁, E[s₂] = s₂ with K = K̂ (the method of moments),
and Û = K̂ β̂^α̂. Dividing the two equations removes K and leaves, for each β, a quadratic in α
with exactly one positive root; the first equation then is one equation in β. Its roots are
bracketed on a grid of logit β (901 points from −45 to 45: β from about 10⁻²⁰ to 1 − 10⁻²⁰)
and refined by bisection; a root outside that range, or a pair of roots within one step, is not seen.

**Where the equations give no single answer** (defined here, not in the paper): with several
roots the largest Û is taken (the cautious choice); with none -- always so when the release has
no class of two (s₂ = 0), since the equations then ask for a population of uniques only -- the
function answers None and the caller decides (the population-uniqueness model then uses
Zayatz's estimate, as ARX's decision rule does where SNB gives none). At π = 1 the release is
the population and Û = s₁ exactly (the equations give the same wherever they have a root).
"""

from __future__ import annotations

import math

import numpy as np

# logit β spans ±GRID_EDGE in GRID_POINTS steps to bracket the roots of the reduced equation
GRID_EDGE = 45.0
GRID_POINTS = 901
# a grid step of 0.1 halved this often is below the spacing of doubles near ±45 (each bracket)
BISECTION_STEPS = 60


def population_classes(sizes: np.ndarray, fraction: float) -> float:
    """K̂, Haas and Stokes's Shlosser-type estimate of the number of non-empty population classes.

    The powers are taken relative to the largest term of each sum so that (1 − q)^i, which
    underflows for large classes and q near 1, cancels in the ratios instead of giving 0/0."""
    sizes = np.asarray(sizes, dtype=np.int64)
    sizes = sizes[sizes > 0]
    values, counts = np.unique(sizes, return_counts=True)
    i = values.astype(np.float64)
    f = counts.astype(np.float64)
    q = float(fraction)
    singles = float(f[0]) if values[0] == 1 else 0.0
    if singles == 0.0 or q >= 1.0:
        return float(sizes.shape[0])
    # (Σ (1−q)^i f_i / Σ i q (1−q)^(i−1) f_i): both sums share the factor (1−q)^i
    log_w = i * math.log1p(-q) + np.log(f)
    w = np.exp(log_w - log_w.max())
    shlosser = float(w.sum() / np.sum(i * q / (1.0 - q) * w))
    # Σ i q² (1−q²)^(i−1) f_i / Σ ((1−q²)^i − (1−q)^i) f_i: both share (1−q²)^i
    log_v = i * math.log1p(-q * q) + np.log(f)
    v = np.exp(log_v - log_v.max())
    remainder = -np.expm1(-i * math.log1p(q))   # 1 − (1 + q)^(−i) = ((1−q²)^i − (1−q)^i) / (1−q²)^i
    second = float(np.sum(i * q * q / (1.0 - q * q) * v) / np.sum(remainder * v))
    return float(sizes.shape[0]) + singles * second * shlosser ** 2


def snb_moments(alpha: np.ndarray | float, logit_beta: np.ndarray | float,
                fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """E[s₁]/K and E[s₂]/K under the SNB model (see the module docstring), elementwise. β is
    given by its logit so that β and 1 − β, and ln β, keep their digits at both ends of (0, 1)."""
    alpha, t = np.asarray(alpha, dtype=np.float64), np.asarray(logit_beta, dtype=np.float64)
    beta, one_minus_beta, log_beta = _beta(t)
    p = float(fraction)
    d = (1.0 - p) * one_minus_beta
    rest = beta + p * one_minus_beta                 # 1 − d, without cancellation for small β
    log_common = alpha * (log_beta - _log_rest(d, rest))
    first = p * np.exp(log_common) * (rest + alpha * d) / rest
    second = p * p * alpha * one_minus_beta * np.exp(log_common) * (2.0 - (1.0 - alpha) * d) / (2.0 * rest ** 2)
    return first, second


def _log_rest(d: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """ln(1 − d): from d where d is small (β near 1), from 1 − d computed as β + π(1 − β) where d
    is near 1 (β and π small); α multiplies it, so either cancellation would cost digits."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d < 0.5, np.log1p(-np.minimum(d, 0.5)), np.log(rest))


def _beta(logit_beta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """β, 1 − β and ln β from logit β."""
    return (1.0 / (1.0 + np.exp(-logit_beta)), 1.0 / (1.0 + np.exp(logit_beta)),
            -np.logaddexp(0.0, -logit_beta))


def _alpha_for(logit_beta: np.ndarray, ratio: float, fraction: float) -> np.ndarray:
    """α with E[s₂]/E[s₁] = ratio at each β: the positive root of A α² + B α − C = 0, where
    A = π(1−β)d, B = π(1−β)(2−d) − 2r(1−d)d, C = 2r(1−d)² (the two moments divided)."""
    beta, one_minus_beta, _ = _beta(logit_beta)
    p = float(fraction)
    d = (1.0 - p) * one_minus_beta
    rest = beta + p * one_minus_beta
    a = p * one_minus_beta * d
    b = p * one_minus_beta * (2.0 - d) - 2.0 * ratio * rest * d
    c = 2.0 * ratio * rest ** 2
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        root = np.sqrt(b * b + 4.0 * a * c)
        # the form without cancellation: b + √… where b ≥ 0, √… − b where b < 0
        return np.where(b >= 0.0, 2.0 * c / (b + root), (root - b) / (2.0 * a))


def snb_parameters(singles: int, pairs: int, classes: float, fraction: float) -> list[tuple[float, float]]:
    """Every (α̂, logit β̂) found with E[s₁] = singles, E[s₂] = pairs for K = classes (possibly none)."""
    if singles <= 0 or pairs <= 0 or classes <= 0:
        return []
    ratio = pairs / singles
    target = math.log(singles / classes)

    def gap(t: np.ndarray | float) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            first, _ = snb_moments(_alpha_for(t, ratio, fraction), t, fraction)
            return np.log(first) - target

    grid = np.linspace(-GRID_EDGE, GRID_EDGE, GRID_POINTS)
    values = gap(grid)
    left, right = values[:-1], values[1:]
    finite = np.isfinite(left) & np.isfinite(right)
    found: list[tuple[float, float]] = []   # (α, logit β)
    for j in np.flatnonzero(finite & ((left == 0.0) | (left * right < 0.0))):
        low, high, low_value = float(grid[j]), float(grid[j + 1]), float(left[j])
        # bisection in scalars (the arrays' overhead would dominate one point at a time)
        for _ in range(BISECTION_STEPS if low_value != 0.0 else 0):
            mid = (low + high) / 2.0
            mid_value = _gap_at(mid, ratio, fraction, target)
            if mid_value * low_value > 0.0:
                low, low_value = mid, mid_value
            else:
                high = mid
        t = low if low_value == 0.0 else (low + high) / 2.0
        alpha = _alpha_at(t, ratio, fraction)
        if math.isfinite(alpha) and alpha > 0.0:
            found.append((alpha, t))
    return found


def _alpha_at(t: float, ratio: float, fraction: float) -> float:
    """`_alpha_for` at one point, in floats."""
    beta, one_minus_beta = 1.0 / (1.0 + math.exp(-t)), 1.0 / (1.0 + math.exp(t))
    p = fraction
    d = (1.0 - p) * one_minus_beta
    rest = beta + p * one_minus_beta
    a = p * one_minus_beta * d
    b = p * one_minus_beta * (2.0 - d) - 2.0 * ratio * rest * d
    c = 2.0 * ratio * rest * rest
    root = math.sqrt(b * b + 4.0 * a * c)
    if b < 0.0:
        return (root - b) / (2.0 * a) if a > 0.0 else math.inf
    return 2.0 * c / (b + root) if b + root > 0.0 else math.inf


def _gap_at(t: float, ratio: float, fraction: float, target: float) -> float:
    """ln(E[s₁]/K) − ln(s₁/K̂) at one logit β, α from the ratio (as `gap` in `snb_parameters`)."""
    alpha = _alpha_at(t, ratio, fraction)
    if not math.isfinite(alpha):
        return math.nan
    p = fraction
    one_minus_beta = 1.0 / (1.0 + math.exp(t))
    d = (1.0 - p) * one_minus_beta
    rest = 1.0 / (1.0 + math.exp(-t)) + p * one_minus_beta
    log_rest = math.log1p(-d) if d < 0.5 else math.log(rest)   # see `_log_rest`
    log_first = (math.log(p) + alpha * (-math.log1p(math.exp(-t)) - log_rest)
                 + math.log(rest + alpha * d) - math.log(rest))
    return log_first - target


def snb_uniques(sizes: np.ndarray, fraction: float) -> float | None:
    """Û = K̂ β̂^α̂, the largest over the roots; 0 without sample uniques; s₁ at π = 1; None where
    the moment equations have no root (see the module docstring)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    sizes = sizes[sizes > 0]
    singles = int(np.count_nonzero(sizes == 1))
    if singles == 0:
        return 0.0
    if fraction >= 1.0:
        return float(singles)
    classes = population_classes(sizes, fraction)
    roots = snb_parameters(singles, int(np.count_nonzero(sizes == 2)), classes, fraction)
    if not roots:
        return None
    return max(classes * math.exp(-alpha * float(np.logaddexp(0.0, -t))) for alpha, t in roots)


# ---------------------------------------------------------------------- the verifier's estimate
def plain_snb_uniques(sizes: list[int], fraction: float) -> float | None:
    """The same estimate in plain Python by another route (the verifier's): K̂ summed term by term,
    α at each β by bisection on E[s₂]/E[s₁] (which rises with α) instead of the quadratic, the
    roots in β refined by bisection. Same conventions as `snb_uniques`."""
    sizes = [int(s) for s in sizes if s > 0]
    singles, pairs = sizes.count(1), sizes.count(2)
    if singles == 0:
        return 0.0
    if fraction >= 1.0:
        return float(singles)
    if pairs == 0:
        return None
    q = fraction
    frequencies: dict[int, int] = {}
    for size in sizes:
        frequencies[size] = frequencies.get(size, 0) + 1
    low_size = min(frequencies)
    # every power relative to the smallest class size's, which cancels in each ratio
    sum_a = sum(i * q * q * (1 - q * q) ** (i - low_size) / (1 - q * q) * f for i, f in frequencies.items())
    sum_b = sum(((1 - q * q) ** (i - low_size) - (1 - q) ** i / (1 - q * q) ** low_size) * f
                for i, f in frequencies.items())
    sum_c = sum((1 - q) ** (i - low_size) * f for i, f in frequencies.items())
    sum_d = sum(i * q * (1 - q) ** (i - low_size) / (1 - q) * f for i, f in frequencies.items())
    classes = len(sizes) + singles * (sum_a / sum_b) * (sum_c / sum_d) ** 2

    def first_moment(alpha: float, t: float) -> float:
        """E[s₁]/K = π (β/(1−d))^α (1−d+αd)/(1−d), 1 − d written β + π(1−β)."""
        beta, one_minus = 1 / (1 + math.exp(-t)), 1 / (1 + math.exp(t))
        d, rest = (1 - q) * one_minus, beta + q * one_minus
        log_rest = math.log1p(-d) if d < 0.5 else math.log(rest)
        return q * math.exp(alpha * (-math.log1p(math.exp(-t)) - log_rest)) * (rest + alpha * d) / rest

    def alpha_at(t: float) -> float:
        # E[s₂]/E[s₁] is free of the exponential factor: π α (1−β)(2−(1−α)d) / (2(1−d)(1−d+αd))
        one_minus = 1 / (1 + math.exp(t))
        d, rest = (1 - q) * one_minus, 1 / (1 + math.exp(-t)) + q * one_minus

        def ratio(alpha: float) -> float:
            return q * alpha * one_minus * (2 - (1 - alpha) * d) / (2 * rest * (rest + alpha * d))

        low, high = 0.0, 1.0
        while ratio(high) < pairs / singles:
            high *= 2.0
            if high > 1e300:
                return math.inf
        for _ in range(80):
            mid = (low + high) / 2
            if mid in (low, high):
                break
            low, high = (mid, high) if ratio(mid) < pairs / singles else (low, mid)
        return (low + high) / 2

    def gap(t: float) -> float:
        alpha = alpha_at(t)
        if not math.isfinite(alpha) or alpha <= 0:
            return math.nan
        e1 = first_moment(alpha, t)
        return math.log(classes * e1 / singles) if e1 > 0 else -math.inf

    step = 2 * GRID_EDGE / (GRID_POINTS - 1)
    grid = [-GRID_EDGE + j * step for j in range(GRID_POINTS)]
    values = [gap(t) for t in grid]
    best: float | None = None
    for j in range(GRID_POINTS - 1):
        a, b, left = grid[j], grid[j + 1], values[j]
        if not (math.isfinite(left) and math.isfinite(values[j + 1])):
            continue
        if left != 0.0 and left * values[j + 1] >= 0.0:
            continue
        for _ in range(200 if left != 0.0 else 0):
            mid = (a + b) / 2
            if mid in (a, b):
                break
            value = gap(mid)
            a, b, left = (mid, b, value) if value * left > 0 else (a, mid, left)
        t = a
        uniques = classes * math.exp(-alpha_at(t) * math.log1p(math.exp(-t)))
        best = uniques if best is None else max(best, uniques)
    return best
