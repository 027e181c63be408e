"""One object with everything a report shows: summary, risk before/after, utility, distributions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from fedanon.engine.anonymizer import Prepared, materialize, prepare
from fedanon.model.config import AnonymizationConfig
from fedanon.stats.classes import Classes
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.result import AnonymizationResult
from fedanon.data.table import EncodedTable
from fedanon.errors import InputError
from fedanon.report.risk import DEFAULT_THRESHOLD, RowClasses, suppressed_rows_mask, table_risk
from fedanon.report.html import write_report
from fedanon.report.utility import (ValueCounts, attribute_utility, distributions, metric_scores, output_distribution,
                                    suppressed_classes)


@dataclass
class Analysis:
    """Risk and utility of one anonymization; `to_dict()` is the JSON report's `risk`/`utility` part."""

    summary: dict[str, Any]
    risk_input: dict[str, Any] | None  # None: the input is nowhere at hand (a distributed run's result)
    risk_output: dict[str, Any]
    attributes: list[dict[str, Any]]
    metrics: dict[str, Any] | None
    distributions: dict[str, Any] = field(default_factory=dict)
    input_unavailable: str | None = None  # why risk_input/metrics are None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "risk": {"input": self.risk_input, "output": self.risk_output},
            "utility": {"attributes": self.attributes, "metrics": self.metrics},
            "distributions": self.distributions,
        }
        if self.input_unavailable:
            out["risk"]["input_unavailable"] = self.input_unavailable
            out["utility"]["unavailable"] = ("loss per attribute and relative scores need the pooled input: "
                                             + self.input_unavailable)
        return out

    def write_html(self, path: str, title: str = "fedanon anonymization report") -> None:
        write_report(self, path, title)


def analyze(
    table: EncodedTable,
    hierarchies: Mapping[str, Hierarchy],
    config: AnonymizationConfig,
    result: AnonymizationResult,
    *,
    research_subset: np.ndarray | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    summary: Mapping[str, Any] | None = None,
) -> Analysis:
    """Describe input and output of `result` (the engine's answer for `table`)."""
    qis = list(config.quasi_identifiers)
    sens = config.sensitive_attributes
    common = dict(sensitive=sens, hierarchies=hierarchies, threshold=threshold, sample=research_subset)
    suppressed = np.asarray(result.suppressed, dtype=bool)
    # the input's classes (the bottom node) are grouped once, for its risk and for the metric scores;
    # the optimum's come from the search (the classes it materialized), or are grouped once here
    prep = _search_preparation(table, hierarchies, config, result, research_subset)
    # each row's class is needed only for sensitive attributes and a research subset; class sizes
    # alone come from the search's cache (the bottom node is usually stored) in no time
    per_row = bool(sens) or research_subset is not None
    bottom = tuple(0 for _ in qis)
    at_bottom = prep.grouper.group_rows(bottom, keep_rows=True) if per_row else prep.grouper.classes(bottom)[0]
    at_opt = result.optimum_classes if prep is result.prepared and result.optimum_classes is not None else \
        prep.grouper.group_rows(tuple(result.transformation[q] for q in qis), keep_rows=True)
    risk_in = table_risk(table, qis, suppressed=np.zeros(table.n_rows, dtype=bool),
                         classes=RowClasses(at_bottom.row_class if per_row else None, at_bottom.stats.sizes),
                         **common)
    risk_out = table_risk(result.output, qis, suppressed=suppressed, classes=_released(at_opt, suppressed, per_row),
                          **common)
    # the QIs' value counts over all rows are the search's level-0 counts (one pass per column saved)
    known = {table.column_index(q): prep.checker.metric.ctx.cardinalities[i][0] for i, q in enumerate(qis)} \
        if prep.table is table else None
    counts = ValueCounts(table, suppressed, known)
    code_maps = {q: (prep.code_maps[i], prep.level_dicts[i]) for i, q in enumerate(qis)}  # built once, by prepare
    report = result.to_report()
    report.update(summary or {})
    report["models"] = _describe(config)
    return Analysis(
        summary=report,
        risk_input=risk_in,
        risk_output=risk_out,
        attributes=attribute_utility(table, hierarchies, result.transformation, counts, code_maps),
        metrics=metric_scores(table, hierarchies, config, result, research_subset, prepared=prep,
                              at_bottom=at_bottom, at_opt=at_opt),
        distributions=distributions(table, result.output, qis + [s for s in sens if s not in qis], counts,
                                    code_maps, result.transformation),
    )


def _search_preparation(table: EncodedTable, hierarchies: Mapping[str, Hierarchy], config: AnonymizationConfig,
                        result: AnonymizationResult, research_subset: np.ndarray | None) -> Prepared:
    """The structure the search ran on when it was this very table, config and subset; else a new one."""
    prep = result.prepared
    if (isinstance(prep, Prepared) and prep.table is table and prep.config is config
            and prep.hierarchies == dict(hierarchies) and _same_subset(prep.grouper.subset, research_subset)):
        return prep
    return prepare(table, dict(hierarchies), config, research_subset)


def _same_subset(held: np.ndarray | None, given: np.ndarray | None) -> bool:
    if held is None or given is None:
        return held is None and given is None
    return held.shape == np.shape(given) and bool(np.array_equal(held != 0, np.asarray(given, dtype=bool)))


def _released(classes: Classes, suppressed: np.ndarray, per_row: bool = True) -> RowClasses:
    """Classes of the released rows of a node whose failing classes were suppressed: the others,
    renumbered in their order (the order risk's own grouping of the written output has);
    without `per_row`, their sizes only."""
    kept = ~suppressed_classes(classes, suppressed)
    if not per_row:
        return RowClasses(None, classes.stats.sizes[kept])
    renumber = np.cumsum(kept) - 1
    return RowClasses(renumber[classes.row_class[~suppressed]], classes.stats.sizes[kept])


INPUT_UNAVAILABLE = ("nobody holds the pooled input in a distributed run (each party holds only its share), "
                     "so its risk and the utility relative to it cannot be computed without pooling the data")


def _written_table_risk(output: EncodedTable, config: AnonymizationConfig,
                        suppressed_rows: Any, hierarchies: Mapping[str, Hierarchy],
                        threshold: float) -> tuple[dict[str, Any], EncodedTable, np.ndarray]:
    """Risk of a protocol's result table as it was delivered (rows in the protocol's order).

    Which all-'*' rows are suppressed follows the protocol's reported count
    (`report.risk.suppressed_rows_mask`); a count the table contradicts falls back
    to the writer's convention and says so.
    """
    qis = list(config.quasi_identifiers)
    sens = [s for s in config.sensitive_attributes if s in output.columns]
    out = output.renumbered()  # each value once, as a table read from the written file would be
    count = suppressed_rows if isinstance(suppressed_rows, int) and not isinstance(suppressed_rows, bool) else None
    try:
        mask, _exact = suppressed_rows_mask(out, qis, count)
    except InputError as exc:
        count, problem = None, f"{exc}; rows with '*' in every quasi-identifier are counted as suppressed"
        mask, _exact = suppressed_rows_mask(out, qis, None)
    else:
        problem = None
    risk = table_risk(out, qis, sensitive=sens, hierarchies=hierarchies, threshold=threshold, suppressed_rows=count)
    if problem:
        risk["note"] = problem
    return risk, out, mask


def analyze_protocol_result(
    table: EncodedTable,
    hierarchies: Mapping[str, Hierarchy],
    config: AnonymizationConfig,
    summary: Mapping[str, Any],
    output: EncodedTable,
    *,
    research_subset: np.ndarray | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> Analysis:
    """Risk and utility of a protocol run whose pooled input is at hand (`fedanon simulate`).

    Output risk: the delivered result table itself (with a research subset: the
    pooled input at the protocol's transformation, which tells the released
    subset rows apart). Input risk, per-attribute loss, metric scores and
    distributions: the pooled input, anonymized at the protocol's
    transformation by the engine (the protocol returns its rows permuted, so
    row-aligned figures are taken from that central twin).
    """
    transformation = dict(summary["transformation"])
    prep = prepare(table, dict(hierarchies), config, research_subset)
    levels = tuple(transformation[q] for q in config.quasi_identifiers)
    optimum = prep.grouper.group_rows(levels, keep_rows=True)
    output, suppressed, kept = materialize(prep, levels, classes=optimum)
    twin = AnonymizationResult(
        transformation=transformation, output=output, suppressed=suppressed, suppressed_rows=int(suppressed.sum()),
        information_loss=float(summary.get("information_loss") or 0.0), metric=str(summary.get("metric", "")),
        classes=kept, checks=0, rollups=0, elapsed_s=0.0, lattice_size=0, optimum_found=True,
        prepared=prep, optimum_classes=optimum)
    analysis = analyze(table, hierarchies, config, twin, research_subset=research_subset, threshold=threshold,
                       summary=summary)
    for key in ("checks", "rollups", "lattice_size", "optimum_found", "algorithm", "tagged"):
        if key not in summary:  # the twin ran no search: show only what the protocol reported
            analysis.summary.pop(key, None)
    if research_subset is None:
        analysis.risk_output, _, _ = _written_table_risk(output, config, summary.get("suppressed_rows"),
                                                      hierarchies, threshold)
        analysis.risk_output["computed_from"] = "the result table the protocol delivered"
    else:
        analysis.risk_output["computed_from"] = ("the pooled input at the protocol's transformation (the research "
                                                 "subset's rows are told apart there)")
    analysis.risk_input["computed_from"] = "the pooled input (known to the simulation only)"
    return analysis


def analyze_protocol_output(
    config: AnonymizationConfig,
    summary: Mapping[str, Any],
    output: EncodedTable,
    *,
    threshold: float = DEFAULT_THRESHOLD,
) -> Analysis:
    """Risk and utility of a distributed run's result, from the result alone.

    Computed where the result is (the coordinator of `fedanon run`, which
    receives it from the result recipient): output risk and what the output
    satisfies, per-attribute generalization level and distinct released values,
    output value counts. Nothing of the input is used or sent anywhere; input
    risk and input-relative utility are reported as not available, with the reason.
    """
    risk, out, suppressed = _written_table_risk(output, config, summary.get("suppressed_rows"), {}, threshold)
    risk["computed_from"] = "the result table (at the coordinator)"
    transformation = summary.get("transformation") or {}
    attributes = []
    for q in config.quasi_identifiers:
        c = out.column_index(q)
        attributes.append({"attribute": q, "level": transformation.get(q),
                           "distinct_output": int(np.unique(out.codes[~suppressed, c]).size)})
    columns = list(config.quasi_identifiers) + [s for s in config.sensitive_attributes
                                                if s not in config.quasi_identifiers and s in out.columns]
    return Analysis(
        summary={**summary, "models": _describe(config)}, risk_input=None, risk_output=risk, attributes=attributes,
        metrics=None, distributions={q: {"input": None, "output": output_distribution(out, q)} for q in columns},
        input_unavailable=INPUT_UNAVAILABLE)


def _describe(config: AnonymizationConfig) -> list[str]:
    out = [f"{config.k}-anonymity"] if config.k > 1 else []
    out.extend(model.describe() for model in config.models)
    out.append(f"suppression limit {config.suppression:g}")
    if config.weights is not None:
        out.append("attribute weights " + ", ".join(f"{q}={w:g}" for q, w in
                                                     zip(config.quasi_identifiers, config.weight_vector())))
    return out


def extend_report(report: dict[str, Any], table: EncodedTable, hierarchies: Mapping[str, Hierarchy],
                  config: AnonymizationConfig, result: AnonymizationResult, *,
                  research_subset: np.ndarray | None = None, html_path: str | None = None) -> Analysis:
    """Add risk, utility and distributions to a CLI JSON report; write the HTML page if asked."""
    analysis = analyze(table, hierarchies, config, result, research_subset=research_subset, summary=report)
    report.update(analysis.to_dict())
    if html_path is not None:
        analysis.write_html(html_path)
        report["html"] = str(html_path)
    return analysis
