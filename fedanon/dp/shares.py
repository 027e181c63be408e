"""Distributed discrete Laplace noise: shares that parties draw apart and that add up to the noise.

Why: in Protocols C and A nobody may know the noise on a released count, so every primary draws a
share, encrypts it with its counts, and only the sum of all shares is ever decrypted (already
added to the sum of the counts).

Why these shares: the discrete Laplace variable with scale s is G₁ − G₂ for two independent
geometric variables (failures before the first success, success probability 1 − e^(−1/s)),
and a geometric variable is infinitely divisible: the sum of m independent negative binomial
variables NB(1/m, 1 − e^(−1/s)) (a Pólya distribution with a fractional number of successes)
is geometric. So m parties that each draw NB(1/m) − NB(1/m) produce discrete Laplace noise
together (Goryczka and Xiong, "A comprehensive comparison of multiparty secure additions with
differential privacy", IEEE TDSC 2017; Balle et al. use the same divisibility).

Which m: the key holder (the run's recipient) is itself a primary and knows its own share. Shares of
NB(1/(n − 1)) for n primaries make every n − 1 of them sum to discrete Laplace noise of the
full scale, so the release is ε-DP also towards any one primary that subtracts its own share
(and towards the helper and the recipients, who see the sum of n shares: the full noise plus
one independent share, which post-processing cannot make less private). The price is a
variance n/(n − 1) times that of one discrete Laplace variable. With a single primary there is
nothing to hide from another primary, and its one share is the plain discrete Laplace variable.

The sampler is NumPy's negative binomial (a Gamma-Poisson mixture in floating point): no
exact sampler for a fractional number of successes exists in OpenDP. Floating-point noise is
attackable when the real-valued noise itself is released (Mironov, CCS 2012: the gaps of the
floating-point grid betray the value it was added to); here every share is an integer, is
encrypted at once and is never seen alone, and only the integer sum of counts and n shares is
decrypted, so no floating-point artefact reaches an output. What remains is the rounding of
the sampler's probabilities (relative error near double precision) -- the statistical test of
the sum (`tests/test_dp_shares.py`) checks the distribution against the exact pmf -- and the
generator: PCG64 seeded with 256 fresh bits from the OS CSPRNG for every release (its state
would have to be recovered from outputs nobody sees).
"""

from __future__ import annotations

import math
import os

import numpy as np

from fedanon.dp.randomness import Randomness, SeededRandomness

#: what the release reports as its mechanism
MECHANISM = "distributed discrete Laplace (Pólya shares, one per primary; NumPy floating-point sampler)"


def share_successes(primaries: int) -> float:
    """The negative binomial's number of successes r of one primary's share: every
    `primaries − 1` shares sum to one geometric variable (a lone primary draws r = 1)."""
    if primaries < 1:
        raise ValueError(f"need at least one primary, got {primaries}")
    return 1.0 if primaries == 1 else 1.0 / (primaries - 1)


def failure_probability(scale: float) -> float:
    """q = e^(−1/scale): the ratio of the discrete Laplace pmf at |x| + 1 and |x|."""
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"noise scale must be positive and finite, got {scale!r}")
    return math.exp(-1.0 / scale)


def noise_shares(generator: np.random.Generator, size: int, scale: float, primaries: int) -> np.ndarray:
    """One primary's shares of `size` noise values (int64): NB(r, 1 − q) − NB(r, 1 − q)."""
    failure_probability(scale)  # checks the scale
    r = share_successes(primaries)
    success = -math.expm1(-1.0 / scale)  # 1 − q without cancellation
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    up = generator.negative_binomial(r, success, size)
    down = generator.negative_binomial(r, success, size)
    return (up - down).astype(np.int64)


def discrete_laplace_pmf(x: np.ndarray | int, scale: float) -> np.ndarray:
    """The exact pmf P[X = x] = (1 − q)/(1 + q) · q^|x| of the discrete Laplace distribution."""
    q = failure_probability(scale)
    return (1.0 - q) / (1.0 + q) * np.power(q, np.abs(np.asarray(x, dtype=np.float64)))


def share_generator(rng: Randomness, purpose: str = "noise shares") -> np.random.Generator:
    """The generator of one party's shares: fresh OS entropy, or -- tests only, when `rng` is
    seeded -- a stream derived from its seed and party stream, so a run can be repeated."""
    if isinstance(rng, SeededRandomness):
        key = tuple(f"{rng.stream}/{purpose}".encode("utf-8"))
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence(rng.seed, spawn_key=key)))
    return np.random.Generator(np.random.PCG64(int.from_bytes(os.urandom(32), "big")))
