"""Anonymize a Parquet dataset that only Dask workers read: the driver never holds a row.

The same search as `anonymizer.anonymize` on the same structure -- code maps from the
hierarchies and the table's dictionaries, a grouper, the lattice, the local checker -- but
the grouper holds no rows: the workers read their row groups from the files
(`backends/dask_tables.py`), every row grouping of a check is theirs, and the statistics
the checker and the metric need are sums of per-partition counts. The driver's memory is
then the search's own (dictionaries, code maps, snapshots of class tables), independent of
the row count. At the optimum the workers write the output, one Parquet file per partition.
The optimum is the one `anonymize` finds on the same rows read whole.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.engine.anonymizer import (Statistics, Structure, local_checker, metric_context, search,
                                       sensitive_attributes)
from fedanon.engine.check.backends.dask import cluster_workers, connect, grouping_setup
from fedanon.engine.check.backends.dask_tables import SUPPRESSED, ColumnRoles, OutputPlan, RemoteTable
from fedanon.engine.check.grouping import Grouper
from fedanon.engine.search.lattice import Lattice
from fedanon.errors import HierarchyError, InputError
from fedanon.model.config import AnonymizationConfig
from fedanon.model.criterion import CriterionContext, build_criteria, saturation_thresholds
from fedanon.stats.keys import key_span


@dataclass
class PartitionedResult:
    """The outcome of a partitioned run: what `AnonymizationResult.to_report` says, without rows."""

    transformation: dict[str, int]
    suppressed_rows: int
    information_loss: float
    metric: str
    classes: int
    checks: int
    rollups: int
    elapsed_s: float
    lattice_size: int
    optimum_found: bool
    rows: int
    algorithm: str
    output_files: list[str]
    extra: dict[str, Any] = field(default_factory=dict)

    def to_report(self) -> dict[str, Any]:
        return {"transformation": dict(self.transformation), "suppressed_rows": self.suppressed_rows,
                "information_loss": self.information_loss, "metric": self.metric, "classes": self.classes,
                "checks": self.checks, "rollups": self.rollups, "elapsed_s": self.elapsed_s,
                "lattice_size": self.lattice_size, "optimum_found": self.optimum_found, "rows": self.rows,
                "algorithm": self.algorithm, "output_files": list(self.output_files), **self.extra}


def _code_maps(table: RemoteTable, source: str, config: AnonymizationConfig,
               hierarchies: dict[str, Hierarchy]) -> tuple[list[np.ndarray], list[list[list[bytes]]]]:
    code_maps, level_dicts = [], []
    for q in config.quasi_identifiers:
        if q not in hierarchies:
            raise InputError(f"no hierarchy given for quasi-identifier {q!r}")
        dictionary = [v.encode("utf-8") for v in table.dictionaries[table.index(q)]]
        missing = hierarchies[q].missing_codes(dictionary)
        if missing:
            value = dictionary[missing[0]].decode("utf-8", errors="backslashreplace")
            raise HierarchyError(f"{source}: value {value[:200]!r} of column {q!r} is missing from its hierarchy"
                                 + (f" {hierarchies[q].source}" if hierarchies[q].source else "")
                                 + (f"; {len(missing)} distinct values are missing in total" if len(missing) > 1 else ""))
        cm, dicts = hierarchies[q].code_map(dictionary)
        code_maps.append(cm)
        level_dicts.append(dicts)
    return code_maps, level_dicts


def anonymize_partitioned(
    source: str | Path,
    hierarchies: dict[str, Hierarchy],
    config: AnonymizationConfig,
    output_dir: str | Path,
    *,
    columns: list[str] | None = None,
    workers: int = 1,
    scheduler: str | None = None,
    client: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> PartitionedResult:
    """Find the optimal transformation of the Parquet file or directory `source` on a Dask
    cluster and write the output partitions into `output_dir` (part-00000.parquet, ...).

    `columns`: the columns to read and write (default: all); the QIs and sensitive attributes
    must be among them. Cluster: `client`, else the scheduler at `scheduler`, else a local
    cluster of `workers` processes on loopback. The files and `output_dir` must be reachable
    under the same paths from every worker.
    """
    start = time.perf_counter()
    config.ensure_valid()  # a no-op on a config validated where it entered
    if config.needs_subset:
        raise InputError("delta-presence needs a research subset, which a partitioned run does not match; "
                         "read the table whole (--backend processes)")
    own = client is None
    cluster = None
    if own:
        client, cluster = connect(scheduler, max(1, int(workers)))
    table = None
    try:
        remote = scheduler is not None or not own
        addresses = cluster_workers(client, int(workers) if not remote or workers > 1 else None)
        table = RemoteTable(client, addresses, source, columns)
        sensitive = sensitive_attributes(config)
        for name in list(config.quasi_identifiers) + sensitive:
            if name not in table.columns:
                raise InputError(f"{source}: unknown column {name!r}; the dataset has columns: "
                                 f"{', '.join(table.columns)}")
        code_maps, level_dicts = _code_maps(table, str(source), config, hierarchies)
        sens_sizes = {a: len(table.dictionaries[table.index(a)]) for a in sensitive}
        sens_maps = {a: hierarchies[a].code_map([v.encode("utf-8") for v in table.dictionaries[table.index(a)]])[0]
                     for a in sensitive if a in hierarchies}
        empty = np.zeros(0, dtype=np.int32)
        grouper = Grouper([empty for _ in code_maps], code_maps, {a: np.zeros(0, dtype=np.int64) for a in sensitive},
                          sens_sizes, None, saturation=saturation_thresholds(build_criteria(config)),
                          n_rows=table.n_rows)
        lattice = Lattice([int(cm.shape[0]) for cm in code_maps])
        dictionaries = [[v.encode("utf-8") for v in d] for d in table.dictionaries]
        shell = EncodedTable(list(table.columns), np.zeros((0, len(table.columns)), dtype=np.int32), dictionaries)
        structure = Structure(shell, config, [table.index(q) for q in config.quasi_identifiers], code_maps,
                              level_dicts, grouper, lattice, hierarchies, sens_maps)
        roles = ColumnRoles([table.index(q) for q in config.quasi_identifiers],
                            {a: table.index(a) for a in sensitive})
        pool = table.build(grouper, roles, grouping_setup(grouper))
        level0, sens_totals = table.counts([cm.shape[1] for cm in code_maps], sens_sizes)
        cards = [[np.bincount(cm[l], weights=level0[i].astype(np.float64), minlength=len(level_dicts[i][l]))
                  .astype(np.int64) for l in range(cm.shape[0])] for i, cm in enumerate(code_maps)]
        statistics = Statistics(CriterionContext(n_rows=table.n_rows, histograms_total=sens_totals,
                                                 sensitive_code_maps=sens_maps, subset_total=None),
                                metric_context(structure, table.n_rows, cards))
        checker = local_checker(structure, statistics)
        ready = time.perf_counter()
        outcome = search(structure, checker, progress)
        searched = time.perf_counter()
        levels = lattice.node_levels(outcome.node)
        optimum, _ = grouper.classes(levels)
        failing = np.asarray(checker.failing_classes(optimum.stats, optimum.codes), dtype=bool)
        radices = grouper.key_shape(levels)[0]
        if not key_span(radices)[1]:
            raise InputError("the optimum's classes have no exact 62-bit key; suppression on the workers needs one")
        failing_keys = np.zeros(0, dtype=np.int64)
        if failing.any():
            codes = optimum.codes[failing].astype(np.int64)
            failing_keys = np.zeros(codes.shape[0], dtype=np.int64)
            for i, r in enumerate(radices):  # the mixed-radix key, QI 0 most significant (`combined_key`)
                failing_keys = failing_keys * r + codes[:, i]
            failing_keys.sort()
        positions = {table.index(q): (i, int(l)) for i, (q, l) in enumerate(zip(config.quasi_identifiers, levels))}
        level_values = {c: [v.decode("utf-8", "backslashreplace") for v in level_dicts[i][l]] + [SUPPRESSED]
                        for c, (i, l) in positions.items()}
        plan = OutputPlan(str(Path(output_dir).resolve()), list(table.columns), positions, level_values, radices,
                          failing_keys)
        rows, suppressed = table.write(plan)
        elapsed = time.perf_counter() - start
        return PartitionedResult(
            transformation={q: int(l) for q, l in zip(config.quasi_identifiers, levels)},
            suppressed_rows=suppressed, information_loss=float(outcome.loss), metric=config.metric,
            classes=int(optimum.count - failing.sum()), checks=outcome.checks, rollups=grouper.rollups,
            elapsed_s=elapsed, lattice_size=lattice.size, optimum_found=outcome.optimum_found, rows=rows,
            algorithm=outcome.algorithm,
            output_files=[str(Path(plan.directory) / f"part-{p:05d}.parquet") for p in range(len(table.parts))],
            extra={"backend": "dask", "workers": len(table.parts), "partitions": len(table.parts),
                   "row_groupings": grouper.row_groupings, "load_s": ready - start, "search_s": searched - ready,
                   "output_s": elapsed - (searched - start), "groupings_on_workers": pool.groupings,
                   "shuffles": pool.shuffles})
    finally:
        if table is not None:
            table.close()
        if own:
            client.close()
        if cluster is not None:
            cluster.close()
