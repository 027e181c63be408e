"""The DP samplers draw from exactly the distributions the privacy proofs assume.

Each test draws at least 10⁵ values and runs a chi-square goodness-of-fit test against the
exact distribution computed here from its formula. Each test also runs the same statistic
against the distribution for a parameter 20 % off (scale or ε) and requires a rejection, so a
sampler calibrated 20 % wrong cannot pass.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedanon.dp.randomness import OpenDPRandomness, SeededRandomness

DRAWS = 100_000
# Wilson-Hilferty z of the chi-square statistic: accept below, reject above (p ≈ 1e-6 one-sided)
Z_LIMIT = 4.75


def chi_square_z(observed: np.ndarray, expected_p: np.ndarray) -> float:
    """z-score of Pearson's chi-square statistic (Wilson-Hilferty), bins with expectation >= 5."""
    n = observed.sum()
    expected = expected_p * n
    assert (expected >= 5).all(), "bins too thin for the chi-square approximation"
    stat = float(((observed - expected) ** 2 / expected).sum())
    d = observed.shape[0] - 1
    return ((stat / d) ** (1 / 3) - (1 - 2 / (9 * d))) / math.sqrt(2 / (9 * d))


def discrete_laplace_bins(draws: np.ndarray, scale: float, cut: int) -> tuple[np.ndarray, np.ndarray]:
    """Observed counts and exact probabilities of -cut..cut, with both tails lumped."""
    p = math.exp(-1.0 / scale)
    values = np.arange(-cut, cut + 1)
    pmf = (1 - p) / (1 + p) * p ** np.abs(values)
    tail = p ** (cut + 1) / (1 + p)                     # P[X > cut] = P[X < -cut]
    expected = np.concatenate([[tail], pmf, [tail]])
    observed = np.concatenate([[(draws < -cut).sum()],
                               [(draws == v).sum() for v in values], [(draws > cut).sum()]]).astype(float)
    return observed, expected


def exponential_mechanism_p(scores: np.ndarray, epsilon: float, sensitivity: float) -> np.ndarray:
    w = np.exp(epsilon * (scores - scores.max()) / (2 * sensitivity))
    return w / w.sum()


def check_fits(observed: np.ndarray, right: np.ndarray, wrong: list[np.ndarray]) -> None:
    z = chi_square_z(observed, right)
    assert z < Z_LIMIT, f"draws do not fit the exact distribution (z={z:.2f})"
    for other in wrong:
        z_wrong = chi_square_z(observed, other)
        assert z_wrong > Z_LIMIT, f"the test cannot tell a 20 % error apart (z={z_wrong:.2f})"


@pytest.fixture(scope="module")
def opendp() -> OpenDPRandomness:
    return OpenDPRandomness()


@pytest.mark.parametrize("scale", [1.0, 3.0])
def test_discrete_laplace_of_opendp(opendp: OpenDPRandomness, scale: float) -> None:
    draws = opendp.discrete_laplace(DRAWS, scale)
    cut = int(scale * 6)
    observed, right = discrete_laplace_bins(draws, scale, cut)
    check_fits(observed, right, [discrete_laplace_bins(draws, scale * f, cut)[1] for f in (0.8, 1.2)])


def test_discrete_laplace_of_the_seeded_test_generator() -> None:
    scale = 2.0
    draws = SeededRandomness(11).discrete_laplace(DRAWS, scale)
    observed, right = discrete_laplace_bins(draws, scale, 12)
    check_fits(observed, right, [discrete_laplace_bins(draws, scale * f, 12)[1] for f in (0.8, 1.2)])


def _selection_counts(rng, scores: np.ndarray, epsilon: float, sensitivity: float, draws: int) -> np.ndarray:
    picks = [rng.exponential_mechanism(scores.tolist(), epsilon, sensitivity) for _ in range(draws)]
    return np.bincount(picks, minlength=scores.shape[0]).astype(float)


SCORES = np.array([-3.0, -1.5, -1.0, 0.0, 0.5, 2.0])


@pytest.mark.slow
def test_exponential_mechanism_of_opendp(opendp: OpenDPRandomness) -> None:
    epsilon, sensitivity = 1.0, 1.5
    observed = _selection_counts(opendp, SCORES, epsilon, sensitivity, DRAWS)
    check_fits(observed, exponential_mechanism_p(SCORES, epsilon, sensitivity),
               [exponential_mechanism_p(SCORES, epsilon * f, sensitivity) for f in (0.8, 1.2)])


def test_exponential_mechanism_of_the_seeded_test_generator() -> None:
    epsilon, sensitivity = 2.0, 1.0
    observed = _selection_counts(SeededRandomness(5), SCORES, epsilon, sensitivity, DRAWS)
    check_fits(observed, exponential_mechanism_p(SCORES, epsilon, sensitivity),
               [exponential_mechanism_p(SCORES, epsilon * f, sensitivity) for f in (0.8, 1.2)])


@pytest.mark.parametrize("rng", ["opendp", "seeded"])
def test_bernoulli_sampling(opendp: OpenDPRandomness, rng: str) -> None:
    beta = 0.3623718483782267          # SafePub's β for ε_anon = 0.45
    source = opendp if rng == "opendp" else SeededRandomness(2)
    kept = source.bernoulli(DRAWS, beta)
    observed = np.array([(~kept).sum(), kept.sum()], dtype=float)
    check_fits(observed, np.array([1 - beta, beta]),
               [np.array([1 - beta * f, beta * f]) for f in (0.8, 1.2)])


def test_the_seeded_generator_repeats_and_opendp_does_not() -> None:
    a, b = SeededRandomness(9), SeededRandomness(9)
    assert (a.bernoulli(1000, 0.5) == b.bernoulli(1000, 0.5)).all()
    assert a.exponential_mechanism(SCORES.tolist(), 1.0) == b.exponential_mechanism(SCORES.tolist(), 1.0)
    o = OpenDPRandomness()
    assert not (o.bernoulli(1000, 0.5) == o.bernoulli(1000, 0.5)).all()
    assert o.seeded is False and a.seeded is True
