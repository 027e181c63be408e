"""One object with everything a report shows: summary, risk before/after, utility, distributions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from fedanon.engine.config import AnonymizationConfig
from fedanon.engine.hierarchy import Hierarchy
from fedanon.engine.result import AnonymizationResult
from fedanon.engine.table import EncodedTable
from fedanon.report.risk import DEFAULT_THRESHOLD, table_risk
from fedanon.report.utility import attribute_utility, distributions, metric_scores


@dataclass
class Analysis:
    """Risk and utility of one anonymization; `to_dict()` is the JSON report's `risk`/`utility` part."""

    summary: dict[str, Any]
    risk_input: dict[str, Any]
    risk_output: dict[str, Any]
    attributes: list[dict[str, Any]]
    metrics: dict[str, Any]
    distributions: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "risk": {"input": self.risk_input, "output": self.risk_output},
            "utility": {"attributes": self.attributes, "metrics": self.metrics},
            "distributions": self.distributions,
        }

    def write_html(self, path: str, title: str = "fedanon anonymization report") -> None:
        from fedanon.report.html import write_report

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
    no_rows = np.zeros(table.n_rows, dtype=bool)
    risk_in = table_risk(table, qis, suppressed=no_rows, **common)
    risk_out = table_risk(result.output, qis, suppressed=np.asarray(result.suppressed, dtype=bool), **common)
    report = result.to_report()
    report.update(summary or {})
    report["models"] = _describe(config)
    return Analysis(
        summary=report,
        risk_input=risk_in,
        risk_output=risk_out,
        attributes=attribute_utility(table, result.output, hierarchies, result.transformation, result.suppressed),
        metrics=metric_scores(table, hierarchies, config, result, research_subset),
        distributions=distributions(table, result.output, qis + [s for s in sens if s not in qis]),
    )


def _describe(config: AnonymizationConfig) -> list[str]:
    out = [f"{config.k}-anonymity"] if config.k > 1 else []
    ld = config.l_diversity
    if ld is not None:
        c = f"{ld.c:g}," if ld.variant == "recursive" else ""
        out.append(f"{ld.variant} ({c}{ld.l:g})-diversity of {ld.attribute}")
    tc = config.t_closeness
    if tc is not None:
        out.append(f"{tc.t:g}-closeness ({tc.kind}) of {tc.attribute}")
    dp = config.delta_presence
    if dp is not None:
        out.append(f"({dp.dmin:g}, {dp.dmax:g})-presence")
    out.append(f"suppression limit {config.suppression:g}")
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
