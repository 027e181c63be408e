"""The result summary every anonymizing command prints (anonymize, simulate, run).

One function so that `fedanon run` shows exactly what `fedanon anonymize` shows
(transformation, information loss, suppressed rows, classes), and one table
layout (two columns, values wrap) that fits an 80-column terminal.
"""

from __future__ import annotations

from typing import Any, Sequence

RESULT_KEYS = ("transformation", "information_loss", "metric", "suppressed_rows", "classes")


def result_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) for the result fields a report carries; absent fields are left out."""
    rows: list[tuple[str, str]] = []
    transformation = report.get("transformation")
    if transformation:
        rows.append(("transformation", ", ".join(f"{a}={lvl}" for a, lvl in transformation.items())))
    if report.get("information_loss") is not None:
        rows.append(("information loss", f"{float(report['information_loss']):.6g} ({report.get('metric')})"))
    if report.get("classes") is not None:
        rows.append(("classes", str(report["classes"])))
    if report.get("suppressed_rows") is not None:
        rows.append(("suppressed rows", str(report["suppressed_rows"])))
    risk = (report.get("risk") or {}).get("output") or {}
    if risk.get("prosecutor"):
        rows.append(("risk (output)", f"prosecutor highest {risk['prosecutor']['highest']:.2%}, average "
                                      f"{risk['prosecutor']['average']:.2%}; k = {risk['satisfies']['k']}"))
    if report.get("dp"):
        rows.append(("differential privacy", dp_text(report["dp"])))
    removed = report.get("removed_columns")
    if removed is not None:
        rows.append(("removed columns", ", ".join(removed) + " (identifying: no role given)" if removed else "none"))
    return rows


def dp_text(dp: dict[str, Any]) -> str:
    """One line on a SafePub release: ε, δ, β, k, the budget split, the sample, that it is a draw."""
    sampled = f"{dp.get('sampled_rows', 0)} of {dp['input_rows']} rows sampled" if "input_rows" in dp \
        else f"{dp.get('sampled_rows', 0)} rows sampled"
    drew = f"drawn by {dp['search_party']}; " if dp.get("search_party") else ""
    return (f"({dp['epsilon']:g}, {dp['delta']:g})-DP by SafePub: beta = {dp['beta']:.3f}, k = {dp['k']}, "
            f"epsilon_search = {dp['epsilon_search']:g} over {dp.get('search', {}).get('steps_taken', 0)} draws, "
            f"epsilon_anon = {dp['epsilon_anon']:g}; {sampled}; {drew}a random draw, not an optimum"
            + ("; SEEDED: for tests only, not private" if dp.get("seeded") else ""))


def party_dp(party_reports: dict[str, Any]) -> dict[str, Any] | None:
    """The DP section of a protocol run (every party reports the same one), or None."""
    return next((r["dp"] for r in party_reports.values() if isinstance(r, dict) and r.get("dp")), None)


def print_summary(title: str, rows: Sequence[tuple[str, str]], stderr: bool = False) -> None:
    """A two-column table; long values wrap instead of widening the table past the terminal."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column("", style="bold", no_wrap=True)
    table.add_column("", overflow="fold")
    for label, value in rows:
        table.add_row(label, value)
    Console(stderr=stderr).print(table)
