"""Microaggregation of numeric attributes: groups of at least k similar records each
released as their group's mean or median (MDAV, univariate fixed-size, k-Ward), with
information loss (SSE/SST) and distance-based record-linkage risk."""

from fedanon.microagg.api import METHODS, Microaggregation, microaggregate, microaggregate_array

__all__ = ["METHODS", "Microaggregation", "microaggregate", "microaggregate_array"]
