"""Builders for generalization hierarchies (ARX CSV layout), so nobody lists values by hand.

Each builder takes the distinct values of one column and returns a validated
`fedanon.engine.Hierarchy` (monotone by construction, and re-checked by
`Hierarchy.from_rows`). `from_column` picks sensible defaults from the data.
"""

from fedanon.data.builders.dates import date_hierarchy
from fedanon.data.builders.fromdata import BUILDERS, build_for_values, column_values
from fedanon.data.builders.intervals import interval_hierarchy
from fedanon.data.builders.masking import mask_hierarchy
from fedanon.data.builders.ordered import order_hierarchy

__all__ = [
    "BUILDERS",
    "build_for_values",
    "column_values",
    "date_hierarchy",
    "interval_hierarchy",
    "mask_hierarchy",
    "order_hierarchy",
]
