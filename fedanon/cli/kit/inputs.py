"""The input files of an anonymizing command, read and cross-checked before any work starts.

Shared by `fedanon anonymize` and `fedanon simulate` (one command does not import another): the
run's files named and distinct, the table read by the reader its format names, roles resolved,
hierarchies read and covering every value, the research subset matched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from fedanon.cli.kit.runconfig import RunSpec
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.io.columnar import ColumnarTable
from fedanon.data.io.delimited import same_file
from fedanon.data.io.registry import read_table
from fedanon.data.prepare import check_values_in_hierarchies, column_roles, match_subset
from fedanon.errors import InputError


def check_output_paths(spec: RunSpec) -> None:
    """The output and the report may never replace the input (or each other)."""
    inputs = [p for p in (spec.input, spec.privacy.subset_path, *spec.privacy.hierarchy_paths.values()) if p]
    for label, path in (("--output", spec.output), ("--report", spec.report)):
        if path is None:
            continue
        if Path(path).is_dir():
            raise InputError(f"{label} {path}: is a directory; give a file name")
        for source in inputs:
            if same_file(path, source):
                raise InputError(f"{label} {path} is an input file ({source}); refusing to overwrite it")
    if spec.output is not None and spec.report is not None and same_file(spec.output, spec.report):
        raise InputError(f"--output and --report name the same file {spec.output}")


class Inputs(NamedTuple):
    table: ColumnarTable
    kept: list[str]            # columns with a role, in input order
    removed: list[str]         # identifying columns (no role): never written
    hierarchies: dict[str, Any]
    subset: np.ndarray | None  # δ-presence research-subset mask


def load_inputs(spec: RunSpec) -> Inputs:
    """Read and cross-check everything an anonymizing command gets (anonymize, simulate).

    Input and output named and distinct, table read, roles resolved, hierarchies
    read and covering every value, research subset matched -- each failure one
    InputError naming file and line, before any work starts.
    """
    if spec.input is None:
        raise InputError("no input table: give INPUT.csv (or input = \"...\" in the run file)")
    if spec.output is None:
        raise InputError("no output file: give --output OUT.csv (or output = \"...\" in the run file)")
    check_output_paths(spec)
    _config, hierarchy_paths, _sensitive, subset_path = spec.privacy
    table = read_table(spec.input, spec.delimiter, spec.encoding)
    config, _paths, sensitive, _subset = spec.privacy
    kept, removed = column_roles(table, config.quasi_identifiers, config.sensitive_attributes, spec.insensitive,
                                 list(spec.aggregate))
    hierarchies = {attr: Hierarchy.read_csv(path, attr, spec.hierarchy_sep, spec.encoding)
                   for attr, path in hierarchy_paths.items()}
    check_values_in_hierarchies(table, hierarchies)
    subset = match_subset(table, subset_path) if subset_path is not None else None
    return Inputs(table, kept, removed, hierarchies, subset)
