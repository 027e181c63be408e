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
#: the scan over n for one δ(k) gives up here: only an ε_anon far beyond useful values
#: (β within a hair of 1, where c(n) hardly falls) needs more
MAX_N = 1 << 18


def sampling_probability(epsilon_anon: float) -> float:
    """β = 1 - e^(-ε_anon): the sampling probability that the anonymization part's ε buys."""
    return -math.expm1(-epsilon_anon)


def gamma(epsilon_anon: float, beta: float) -> float:
    """γ = (e^ε - 1 + β) / e^ε, the largest share of a class's candidates that may be sampled."""
    power = math.exp(epsilon_anon)
    return (power - 1.0 + beta) / power


class _BinomialTails:
    """a(n) = P[Binomial(n, β) > γ·n] and the bound c(n), as arrays over n = 0, 1, 2, ...

    Why arrays: for ε_anon of a few units γ is close to β, c(n) falls slowly and the scan for
    one k runs over tens of thousands of n; the scans of different k overlap, so a(n) is
    computed once per n and each scan is a vectorized running maximum.
    """

    def __init__(self, beta: float, g: float) -> None:
        self.beta, self.gamma = beta, g
        self.log_beta, self.log_rest = math.log(beta), math.log1p(-beta)
        self.rate = g * math.log(g / beta) - (g - beta)
        self._log_fact = np.zeros(1)
        self.a = np.zeros(1)          # a(0) = 0 (an empty class is never released)
        self.c = np.ones(1)

    def _factorials(self, n: int) -> np.ndarray:
        if self._log_fact.shape[0] <= n:
            size = max(n + 1, 2 * self._log_fact.shape[0])
            self._log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, size, dtype=np.float64)))])
        return self._log_fact

    def _a(self, n: int) -> float:
        start = math.floor(n * self.gamma) + 1
        if start > n:
            return 0.0
        lf = self._factorials(n)
        j = np.arange(start, n + 1)
        logs = lf[n] - lf[j] - lf[n - j] + j * self.log_beta + (n - j) * self.log_rest
        top = float(logs.max())
        return float(math.exp(top) * np.exp(logs - top).sum())

    def extend(self, upto: int) -> None:
        """Make a and c known for every n <= upto."""
        have = self.a.shape[0]
        if upto < have:
            return
        self._factorials(upto)
        fresh = np.array([self._a(n) for n in range(have, upto + 1)])
        self.a = np.concatenate([self.a, fresh])
        self.c = np.exp(-np.arange(upto + 1, dtype=np.float64) * self.rate)


def delta_for_k(k: int, epsilon_anon: float, beta: float, tails: _BinomialTails | None = None) -> float:
    """δ(k) of sampling with β followed by a safe k-anonymization, per the formula above."""
    g = gamma(epsilon_anon, beta)
    tails = tails or _BinomialTails(beta, g)
    start = max(1, math.ceil(k / g - 1.0))
    upto = max(2 * start, 1024)
    while True:
        tails.extend(upto)
        running = np.maximum.accumulate(tails.a[start:upto + 1])
        done = np.flatnonzero(running >= tails.c[start:upto + 1])
        if done.size:
            return float(running[done[0]])
        if upto >= MAX_N:
            raise InputError(f"epsilon_anon={epsilon_anon:g} is too large to derive k (beta={beta:.6f} is too "
                             "close to 1); use a smaller --dp epsilon")
        upto = min(2 * upto, MAX_N)


def smallest_k(delta: float, epsilon_anon: float, beta: float) -> int:
    """The smallest k with δ(k) ≤ δ.

    δ(k) does not increase with k (its range of n starts at n_m, which grows with k), so the
    answer is found by doubling and bisection: O(log k) decisions "δ(k) ≤ δ?", not k of them.
    """
    tails = _BinomialTails(beta, gamma(epsilon_anon, beta))
    if tails.rate <= 0 or math.log(1.0 / delta) / tails.rate > MAX_N:
        # the bound c(n) reaches δ only beyond MAX_N: the scans could not end (checked up front
        # because evaluating that many a(n) takes minutes)
        raise InputError(f"epsilon_anon={epsilon_anon:g} is too large to derive k for delta={delta:g} "
                         f"(beta={beta:.6f} is too close to 1); use a smaller --dp epsilon")

    # a(n) ≤ c(n) ≤ c(n*) ≤ δ for every n ≥ n*, so δ(k) ≤ δ exactly when no a(n) with
    # n_m ≤ n < n* exceeds δ: one scan of a bounded range decides each k
    n_star = math.ceil(math.log(1.0 / delta) / tails.rate)
    tails.extend(n_star)
    g = tails.gamma

    def ok(k: int) -> bool:
        start = max(1, math.ceil(k / g - 1.0))
        return start >= n_star or float(tails.a[start:n_star].max()) <= delta

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
