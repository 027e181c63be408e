"""Where every random bit of a DP release comes from: OpenDP's exact samplers, or a seeded
generator that exists for tests only.

Why OpenDP: noise drawn with floating-point arithmetic (a textbook Laplace sampler) leaks
through the gaps and biases of the floating-point grid (Mironov, CCS 2012). OpenDP's discrete
Laplace and its Gumbel-based selection sample exactly from OS randomness and are maintained
with written proofs. The three operations a release needs:

* `bernoulli` -- SafePub's row sampling. Each row is kept when a uniform 64-bit integer from
  the OS CSPRNG (`os.urandom`, the source OpenDP itself reads) lies below ⌊β·2⁶⁴⌋: an exact
  Bernoulli(β') with β - 2⁻⁶⁴ < β' ≤ β (a smaller β only lowers ε_anon). No floating-point
  noise is added to anything, so the attacks above do not apply.
* `exponential_mechanism` -- OpenDP's `make_noisy_max` with Gumbel noise (its zCDP
  variant): report-noisy-max with Gumbel(scale) noise selects candidate i with probability
  ∝ exp(score_i / scale), which is exactly McSherry and Talwar's exponential mechanism for
  scale = 2·Δ/ε, and thus ε-DP for scores of sensitivity Δ. (Its pure-DP variant draws
  exponential noise, i.e. permute-and-flip: a different distribution than SafePub's.)
* `discrete_laplace` -- OpenDP's `make_laplace` on integers (exact discrete Laplace, the
  "geometric mechanism"): P[X = x] ∝ exp(-|x| / scale).

OpenDP reads the OS's randomness and cannot be seeded. `SeededRandomness` draws the same
distributions from NumPy's PCG64 with floating-point arithmetic, so that a test can repeat a
release; it is FOR TESTS ONLY -- anyone who knows or guesses the seed can recompute every
draw, and its samplers are not hardened -- and every release made with it says so.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from typing import Any, Sequence

import numpy as np

from fedanon.errors import FedanonError, InputError

TWO_64 = 1 << 64


def _opendp() -> Any:
    """The OpenDP prelude with its 'contrib' features (the samplers below are in contrib)."""
    try:
        import opendp.prelude as dp
    except ModuleNotFoundError:
        raise FedanonError("differential privacy needs OpenDP: pip install 'fedanon[dp]'") from None
    dp.enable_features("contrib")
    return dp


class Randomness(ABC):
    """The random draws of one DP release (sampling, selection, noise)."""

    #: True only for the test-only seeded generator; releases record it
    seeded: bool = False
    name: str = ""

    @abstractmethod
    def bernoulli(self, n: int, p: float) -> np.ndarray:
        """n independent Bernoulli(p) flags (bool)."""

    @abstractmethod
    def exponential_mechanism(self, scores: Sequence[float], epsilon: float, sensitivity: float = 1.0) -> int:
        """The index of one candidate, drawn with probability ∝ exp(ε·score / (2·sensitivity))."""

    @abstractmethod
    def discrete_laplace(self, size: int, scale: float) -> np.ndarray:
        """`size` independent integers with P[x] ∝ exp(-|x| / scale) (int64)."""


def _check_probability(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"probability {p!r} outside [0, 1]")


def _check_scale(scale: float) -> None:
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"noise scale must be positive and finite, got {scale!r}")


class OpenDPRandomness(Randomness):
    """The production source: OpenDP's exact samplers and the OS CSPRNG (see the module text)."""

    name = "opendp"

    def __init__(self) -> None:
        self._dp = _opendp()
        self._selectors: dict[float, Any] = {}
        self._laplace: dict[float, Any] = {}

    def bernoulli(self, n: int, p: float) -> np.ndarray:
        _check_probability(p)
        threshold = math.floor(p * TWO_64)   # exact: p is a binary fraction
        if threshold >= TWO_64:
            return np.ones(n, dtype=bool)
        draws = np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        return draws < np.uint64(threshold)

    def exponential_mechanism(self, scores: Sequence[float], epsilon: float, sensitivity: float = 1.0) -> int:
        if not scores:
            raise ValueError("the exponential mechanism needs at least one candidate")
        scale = 2.0 * sensitivity / epsilon
        _check_scale(scale)
        selector = self._selectors.get(scale)
        if selector is None:
            dp = self._dp
            space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
            selector = self._selectors[scale] = dp.m.make_noisy_max(
                *space, output_measure=dp.zero_concentrated_divergence(), scale=scale)
        return int(selector([float(s) for s in scores]))

    def discrete_laplace(self, size: int, scale: float) -> np.ndarray:
        _check_scale(scale)
        if size == 0:
            return np.zeros(0, dtype=np.int64)
        mechanism = self._laplace.get(scale)
        if mechanism is None:
            dp = self._dp
            mechanism = self._laplace[scale] = dp.m.make_laplace(
                dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=scale)
        return np.asarray(mechanism([0] * size), dtype=np.int64)


class SeededRandomness(Randomness):
    """FOR TESTS ONLY: the same distributions from a seeded PCG64, so a release can be repeated.

    Not differentially private in practice: the seed determines every draw, and the
    samplers use floating-point arithmetic (Gumbel-max, differences of geometric draws).
    """

    seeded = True
    name = "seeded (tests only)"

    def __init__(self, seed: int, stream: str = "") -> None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InputError(f"seed must be an integer >= 0, got {seed!r}")
        self.seed, self.stream = seed, stream
        # one independent stream per party of a protocol run (`stream` = its name), so that
        # parties given the same seed do not draw the same bits; "" is the local release's
        source = seed if not stream else np.random.SeedSequence(seed, spawn_key=tuple(stream.encode("utf-8")))
        self.rng = np.random.Generator(np.random.PCG64(source))

    def bernoulli(self, n: int, p: float) -> np.ndarray:
        _check_probability(p)
        return self.rng.random(n) < p

    def exponential_mechanism(self, scores: Sequence[float], epsilon: float, sensitivity: float = 1.0) -> int:
        if not scores:
            raise ValueError("the exponential mechanism needs at least one candidate")
        scale = 2.0 * sensitivity / epsilon
        _check_scale(scale)
        values = np.asarray(scores, dtype=np.float64) / scale
        return int(np.argmax(values + self.rng.gumbel(size=values.shape[0])))

    def discrete_laplace(self, size: int, scale: float) -> np.ndarray:
        _check_scale(scale)
        # the difference of two geometric counts of failures with success 1 - e^(-1/scale)
        success = -math.expm1(-1.0 / scale)
        return (self.rng.geometric(success, size) - self.rng.geometric(success, size)).astype(np.int64)


def randomness(seed: int | None, stream: str = "") -> Randomness:
    """OpenDP's samplers, or -- only when a seed is given -- the test-only seeded generator
    (`stream` names one party of a protocol run: each party draws its own stream)."""
    return OpenDPRandomness() if seed is None else SeededRandomness(seed, stream)
