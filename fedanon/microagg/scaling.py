"""Standardizing numeric attributes, so that distances weigh every attribute alike.

Why a module of its own: the multivariate methods group on z-scores, and the quality
measures (SSE/SST, record linkage) are computed on the same scale, so both must agree
on one definition: the population mean and standard deviation (ddof = 0) of the
*original* data. A constant attribute (standard deviation 0) is left centred at 0
instead of being divided by zero: it carries no information for grouping.
"""

from __future__ import annotations

import numpy as np


def column_scale(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and divisor of each column (the standard deviation, or 1 for a constant column)."""
    mean = values.mean(axis=0)
    std = values.std(axis=0)
    return mean, np.where(std > 0, std, 1.0)


def standardize(values: np.ndarray, mean: np.ndarray | None = None, scale: np.ndarray | None = None) -> np.ndarray:
    """Z-scores of `values` (n, d), by the given mean/scale or the values' own."""
    if mean is None or scale is None:
        mean, scale = column_scale(values)
    return (values - mean) / scale
