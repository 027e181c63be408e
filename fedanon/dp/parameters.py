"""SafePub's parameters: β from ε_anon and the smallest k that keeps δ (Li, Qardaji, Su 2012).

A release that keeps each row with probability β and then applies a generalization chosen
independently of the rows, suppressing every class below k rows, is (ε_anon, δ)-differentially
private with ε_anon = -ln(1 - β) and

    δ(k) = max over n ≥ n_m of  a(n),   a(n) = Σ_{j > γ·n}^{n} Binomial(j; n, β),
    γ = (e^ε_anon - 1 + β) / e^ε_anon,   n_m = ⌈k / γ - 1⌉.

SafePub (Bild, Kuhn, Prasser, PoPETs 2018) fixes β = 1 - e^(-ε_anon) and takes the smallest k
with δ(k) ≤ δ. The maximum over the unbounded range of n is found exactly: a Chernoff bound
c(n) = exp(-n·(γ·ln(γ/β) - (γ - β))) bounds every a(n') with n' ≥ n and decreases in n, so
once the running maximum reaches c(n) no later n can raise it.

Everything here is deterministic arithmetic on public parameters; it spends no budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedanon.errors import InputError

#: the search for k gives up here: a k this large suppresses any realistic table entirely
MAX_K = 1_000_000


def sampling_probability(epsilon_anon: float) -> float:
    """β = 1 - e^(-ε_anon): the sampling probability that the anonymization part's ε buys."""
    return -math.expm1(-epsilon_anon)


def gamma(epsilon_anon: float, beta: float) -> float:
    """γ = (e^ε - 1 + β) / e^ε, the largest share of a class's candidates that may be sampled."""
    power = math.exp(epsilon_anon)
    return (power - 1.0 + beta) / power


class _BinomialTails:
    """a(n) = P[Binomial(n, β) > γ·n], summed in log space over a growing log-factorial table."""

    def __init__(self, beta: float, g: float) -> None:
        self.beta, self.gamma = beta, g
        self.log_beta, self.log_rest = math.log(beta), math.log1p(-beta)
        self._log_fact = np.zeros(1)
        self._cache: dict[int, float] = {}

    def _factorials(self, n: int) -> np.ndarray:
        if self._log_fact.shape[0] <= n:
            size = max(n + 1, 2 * self._log_fact.shape[0])
            self._log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, size, dtype=np.float64)))])
        return self._log_fact

    def a(self, n: int) -> float:
        cached = self._cache.get(n)
        if cached is not None:
            return cached
        start = math.floor(n * self.gamma) + 1
        if start > n:
            value = 0.0
        else:
            lf = self._factorials(n)
            j = np.arange(start, n + 1)
            logs = lf[n] - lf[j] - lf[n - j] + j * self.log_beta + (n - j) * self.log_rest
            top = float(logs.max())
            value = float(math.exp(top) * np.exp(logs - top).sum())
        self._cache[n] = value
        return value

    def c(self, n: int) -> float:
        g, b = self.gamma, self.beta
        return math.exp(-n * (g * math.log(g / b) - (g - b)))


def delta_for_k(k: int, epsilon_anon: float, beta: float, tails: _BinomialTails | None = None) -> float:
    """δ(k) of sampling with β followed by a safe k-anonymization, per the formula above."""
    g = gamma(epsilon_anon, beta)
    tails = tails or _BinomialTails(beta, g)
    n = max(1, math.ceil(k / g - 1.0))
    best = 0.0
    while True:
        best = max(best, tails.a(n))
        if best >= tails.c(n):
            return best
        n += 1


def smallest_k(delta: float, epsilon_anon: float, beta: float) -> int:
    """The smallest k with δ(k) ≤ δ.

    δ(k) does not increase with k (its range of n starts at n_m, which grows with k), so the
    answer is found by doubling and bisection: O(log k) evaluations of δ, not k of them.
    """
    tails = _BinomialTails(beta, gamma(epsilon_anon, beta))

    def ok(k: int) -> bool:
        return delta_for_k(k, epsilon_anon, beta, tails) <= delta

    if ok(1):
        return 1
    low, high = 1, 2                     # invariant: not ok(low)
    while not ok(high):
        low, high = high, 2 * high
        if high > MAX_K:
            raise InputError(f"no k up to {MAX_K:,} reaches delta={delta:g} with epsilon_anon={epsilon_anon:g}")
    while high - low > 1:                # invariant: not ok(low), ok(high)
        mid = (low + high) // 2
        low, high = (low, mid) if ok(mid) else (mid, high)
    return high


@dataclass(frozen=True)
class SafePubParameters:
    """What a SafePub release spends and derives: the budget split, β and k."""

    epsilon: float
    delta: float
    epsilon_search: float
    steps: int

    @property
    def epsilon_anon(self) -> float:
        """The part of ε the sampling and the k-anonymization spend: ε - ε_search."""
        return self.epsilon - self.epsilon_search

    @property
    def epsilon_per_step(self) -> float:
        """Each of the `steps` exponential-mechanism draws spends ε_search / steps."""
        return self.epsilon_search / self.steps if self.steps else 0.0

    @property
    def beta(self) -> float:
        return sampling_probability(self.epsilon_anon)

    @property
    def k(self) -> int:
        return _k_cached(self.delta, self.epsilon_anon)

    def to_dict(self) -> dict[str, float | int]:
        return {"epsilon": self.epsilon, "delta": self.delta, "epsilon_anon": self.epsilon_anon,
                "epsilon_search": self.epsilon_search, "steps": self.steps,
                "epsilon_per_step": self.epsilon_per_step, "beta": self.beta, "k": self.k}


def derive_k(delta: float, epsilon_anon: float) -> int:
    """SafePub's k for (ε_anon, δ), with β = 1 - e^(-ε_anon); computed afresh on every call."""
    return smallest_k(delta, epsilon_anon, sampling_probability(epsilon_anon))


_K_CACHE: dict[tuple[float, float], int] = {}


def _k_cached(delta: float, epsilon_anon: float) -> int:
    """derive_k, once per process and parameters (a large ε takes seconds)."""
    key = (delta, epsilon_anon)
    if key not in _K_CACHE:
        _K_CACHE[key] = derive_k(delta, epsilon_anon)
    return _K_CACHE[key]
