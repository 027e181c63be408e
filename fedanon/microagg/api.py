"""`microaggregate`: one call from numeric columns to released columns and quality figures.

Method names as the command line spells them:

* `mdav` -- multivariate, MDAV on the standardized attributes;
* `univariate` -- single-axis sorting: records sorted once, by `sort_by` (an attribute,
  `pc1` = first principal component of the standardized attributes, the default, or
  `zsum` = sum of z-scores), cut into fixed-size groups, all attributes aggregated;
* `individual` -- individual sorting: each attribute grouped on its own order;
* `kward` -- k-Ward on the standardized attributes (at most `KWARD_MAX_ROWS` records).

Groups have at least k records; `mdav`, `univariate` and `individual` also promise at
most 2k - 1 (only one group per grouping is larger than k), and so does `kward`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from fedanon.microagg.aggregate import AGGREGATES, aggregate
from fedanon.microagg.kward import KWARD_MAX_ROWS, kward_labels
from fedanon.microagg.mdav import mdav_labels
from fedanon.microagg.quality import attribute_summary, group_summary, linkage_risk, sse_sst
from fedanon.microagg.scaling import standardize
from fedanon.microagg.univariate import SORT_KEYS, individual_labels, single_axis_labels, sort_key

METHODS = ("mdav", "univariate", "individual", "kward")


@dataclass
class Microaggregation:
    """A release: the aggregated values, the groupings behind them and the quality figures."""

    attributes: list[str]
    released: np.ndarray                 # (n, d) float64, column j = attribute j
    groupings: list[np.ndarray]          # one label array per grouping (individual: one per attribute)
    method: str
    k: int
    aggregate: str
    sort_by: str | None = None
    quality: dict[str, Any] = field(default_factory=dict)

    def column(self, name: str) -> np.ndarray:
        return self.released[:, self.attributes.index(name)]


def group_labels(values: np.ndarray, k: int, method: str, names: Sequence[str], sort_by: str = "pc1") -> list[np.ndarray]:
    """The groupings of `method` on `values` (n, d): one label array, or one per attribute."""
    n = int(values.shape[0])
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a whole number of at least 1, got {k!r}")
    if k > n:
        raise ValueError(f"k = {k} exceeds the number of records ({n})")
    if method == "individual":
        return individual_labels(values, k)
    if method == "univariate":
        return [single_axis_labels(sort_key(values, list(names), sort_by), k)]
    z = standardize(values)
    if method == "kward":
        return [kward_labels(z, k)]
    return [mdav_labels(z, k)]


def microaggregate_array(values: np.ndarray, k: int, method: str = "mdav", how: str = "mean",
                         names: Sequence[str] | None = None, sort_by: str = "pc1",
                         quality: bool = True) -> Microaggregation:
    """Microaggregate the numeric matrix `values` (n records x d attributes)."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape[0] == 0 or values.shape[1] == 0:
        raise ValueError("values must be a non-empty (records x attributes) matrix")
    if not np.isfinite(values).all():
        raise ValueError("values must be finite numbers (no NaN or infinity)")
    names = [f"x{j}" for j in range(values.shape[1])] if names is None else [str(n) for n in names]
    if len(names) != values.shape[1]:
        raise ValueError(f"{len(names)} names for {values.shape[1]} attributes")
    if how not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {how!r}")
    if method == "univariate" and sort_by not in names and sort_by not in SORT_KEYS:
        raise ValueError(f"sort_by must be one of the attributes ({', '.join(names)}), pc1 or zsum, got {sort_by!r}")
    groupings = group_labels(values, k, method, names, sort_by)
    if len(groupings) == 1:
        released = aggregate(values, groupings[0], how)
    else:
        released = np.column_stack([aggregate(values[:, [j]], labels, how)[:, 0]
                                    for j, labels in enumerate(groupings)])
    result = Microaggregation(names, released, groupings, method, int(k), how,
                              sort_by if method == "univariate" else None)
    if quality:
        result.quality = assess(names, values, result)
    return result


def assess(names: list[str], values: np.ndarray, result: Microaggregation) -> dict[str, Any]:
    """The report's figures: SSE/SST, record-linkage risk, group sizes, means and variances."""
    loss = sse_sst(values, result.released)
    groups = [group_summary(labels) for labels in result.groupings]
    return {
        "records": int(values.shape[0]),
        "information_loss": {"sse": loss["sse"], "sst": loss["sst"], "sse_sst": loss["sse_sst"],
                             "sse_sst_per_attribute": dict(zip(names, loss["sse_sst_per_attribute"]))},
        "record_linkage_risk": linkage_risk(values, result.released),
        "groups": groups[0] if len(groups) == 1 else dict(zip(names, groups)),
        "per_attribute": attribute_summary(names, values, result.released),
    }


def microaggregate(data: Any, attributes: Sequence[str] | None = None, k: int = 3, method: str = "mdav",
                   aggregate: str = "mean", sort_by: str = "pc1", insensitive: Sequence[str] = ()) -> tuple[Any, Microaggregation]:
    """Microaggregate the numeric `attributes` of a pandas DataFrame or a mapping of columns.

    Returns (released data of the same kind, Microaggregation). As everywhere in fedanon,
    every column has a role: the `attributes` are aggregated, `insensitive` columns are
    returned unchanged, and any other column is identifying and left out of the result.
    Without `attributes`, every column not declared insensitive is aggregated.
    """
    is_frame = hasattr(data, "columns") and hasattr(data, "iloc")
    columns: Mapping[str, Any] = {str(c): data[c] for c in data.columns} if is_frame else dict(data)
    names = [str(a) for a in attributes] if attributes is not None else \
        [c for c in columns if c not in set(insensitive)]
    for name in list(names) + list(insensitive):
        if name not in columns:
            raise KeyError(f"no column {name!r}; columns: {', '.join(columns)}")
    values = np.column_stack([np.asarray(columns[a], dtype=np.float64) for a in names])
    result = microaggregate_array(values, k, method, aggregate, names, sort_by)
    out_names = [c for c in columns if c in set(names) or c in set(insensitive)]
    out = {c: (result.column(c) if c in names else columns[c]) for c in out_names}
    if is_frame:
        import pandas as pd

        return pd.DataFrame({c: (np.asarray(v) if c in names else data[c].to_numpy()) for c, v in out.items()},
                            index=data.index), result
    return out, result


__all__ = ["METHODS", "KWARD_MAX_ROWS", "Microaggregation", "microaggregate", "microaggregate_array", "assess"]
