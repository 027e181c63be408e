"""A single self-contained HTML page: summary, risk and utility tables, plots (inline SVG).

Self-contained on purpose: the page is mailed to ethics boards and opened
offline, so it loads nothing (no scripts, fonts or images from elsewhere).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from fedanon.kit.atomicfile import write_text_atomic
from fedanon.errors import InputError
from fedanon.report.plots import before_after, paired_bars
from fedanon.report.risk import risk_bands, size_bins

if TYPE_CHECKING:
    from fedanon.report.analysis import Analysis

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em} h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0} th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3} td.l,th.l{text-align:left} .note{color:#555;font-size:.9em;max-width:60em}
.grid{display:flex;flex-wrap:wrap;gap:1em} .ok{color:#1a7f37;font-weight:bold} .warn{color:#b35900;font-weight:bold}
figure{margin:.5em 0} svg{max-width:100%;height:auto}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.2f} %"


def _table(head: Iterable[str] | None, rows: Iterable[Iterable[Any]], table_id: str) -> str:
    if head is None:
        body = "".join("<tr>" + "".join(f"<td class=l>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
        return f'<table id="{table_id}"><tbody>{body}</tbody></table>'
    th = "".join(f"<th{' class=l' if i == 0 else ''}>{_e(h)}</th>" for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f"<td{' class=l' if i == 0 else ''}>{_e(c)}</td>" for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f'<table id="{table_id}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _risk_rows(columns: list[dict[str, Any]]) -> list[list[str]]:
    """One row per figure, one column per risk dict (input and output, or output alone)."""
    def get(r: dict[str, Any], model: str, key: str) -> Any:
        return (r.get(model) or {}).get(key)

    def row(label: str, cell: Any) -> list[Any]:
        return [label, *(cell(r) for r in columns)]

    threshold = columns[-1]["threshold"]
    rows = [row("released rows", lambda r: r["rows"]), row("suppressed rows", lambda r: r["suppressed_rows"]),
            row("equivalence classes", lambda r: r["classes"]),
            row("sample uniques", lambda r: r["sample_uniques"])]
    for model in ("prosecutor", "journalist"):
        rows.append(row(f"{model}: highest risk", lambda r: _pct(get(r, model, "highest"))))
        rows.append(row(f"{model}: average risk", lambda r: _pct(get(r, model, "average"))))
        rows.append(row(f"{model}: records at risk (> {threshold:g})",
                        lambda r: f"{get(r, model, 'records_at_risk')} ({_pct(get(r, model, 'records_at_risk_fraction'))})"))
    rows.append(row("marketer: average risk", lambda r: _pct(get(r, "marketer", "average"))))
    rows.append(row("largest k satisfied", lambda r: _num(r["satisfies"]["k"])))
    for attr in columns[-1]["satisfies"]["sensitive"]:
        sats = [r["satisfies"]["sensitive"].get(attr, {}) for r in columns]
        rows.append([f"{attr}: distinct ℓ", *(x.get("distinct_l") for x in sats)])
        rows.append([f"{attr}: entropy ℓ", *(_num(x.get("entropy_l")) for x in sats)])
        common = set.intersection(*(set(x.get("recursive_c", {})) for x in sats))
        for l_value in sorted(common, key=int)[:3]:
            rows.append([f"{attr}: recursive (c,{l_value}): every c >", *(_num(x["recursive_c"][l_value]) for x in sats)])
        for kind in ("t_equal", "t_hierarchical"):
            if all(kind in x for x in sats):
                rows.append([f"{attr}: smallest t ({kind[2:]} distance)", *(_num(x[kind]) for x in sats)])
    return [[str(c) for c in r] for r in rows]


def _bars(title: str, bins_in: list[tuple[str, int]] | None, bins_out: list[tuple[str, int]]) -> str:
    return paired_bars(title, [b for b, _ in bins_out], None if bins_in is None else [n for _, n in bins_in],
                       [n for _, n in bins_out])


def render(a: "Analysis", title: str) -> str:
    s = a.summary
    ri, ro = a.risk_input, a.risk_output
    verified = s.get("verified")
    summary_rows = [
        ["input", s.get("input", "(in memory)" if ri is not None else "the parties' shares (never pooled)")],
        ["rows", s.get("rows", ro["rows"] + ro["suppressed_rows"])],
        ["privacy models", "; ".join(s.get("models", []))],
        ["transformation", ", ".join(f"{k}={v}" for k, v in s["transformation"].items())],
        ["information loss", f"{s['information_loss']:.6g} ({s['metric']})"],
        ["classes / suppressed rows", f"{s['classes']} / {s['suppressed_rows']}"],
    ]
    if s.get("checks") is not None:
        summary_rows.append(["search", f"{s.get('checks')} checks, {s.get('lattice_size')} nodes, "
                                       f"{s.get('elapsed_s', 0):.3f} s"])
    if s.get("protocol"):
        summary_rows.append(["protocol", f"{s['protocol']}, {s.get('distribution', '')}"])
    if verified is not None:
        summary_rows.append(["independent verifier", "OK" if verified else "VIOLATIONS"])
    owner = ("<p class=warn>For the data owner: this page shows value distributions and risk figures of the "
             "raw input. Do not publish it with the released table.</p>" if ri is not None else
             f"<p class=warn>Input figures not available: {_e(a.input_unavailable or '')}. This page describes "
             "the released result only.</p>")
    parts = [f"<h1>{_e(title)}</h1>", owner,
             f'<p class=note>Output {"verified" if verified else "written"} by fedanon. Risk figures: '
             f"prosecutor = the attacker knows the person is in the data; journalist = the person is in the "
             f"population: {_e(ro.get('population'))}; marketer = share of records re-identified on average. "
             f"Records at risk: released records whose risk exceeds {ro['threshold']:g}.</p>",
             "<h2>Summary</h2>", _table(None, summary_rows, "summary"),
             "<h2>Re-identification risk</h2>",
             _table(["", "input", "output"] if ri is not None else ["", "output"],
                    _risk_rows([ri, ro] if ri is not None else [ro]), "risk")]
    if ro.get("note"):
        parts.append(f"<p class=note>{_e(ro['note'])}</p>")
    parts.append('<div class=grid>')
    parts.append("<figure id=class-sizes>" + _bars("Records by equivalence-class size",
                                                   size_bins(ri) if ri is not None else None, size_bins(ro))
                 + "</figure>")
    parts.append("<figure id=risk-profile>" + _bars("Records by prosecutor risk",
                                                    risk_bands(ri) if ri is not None else None, risk_bands(ro))
                 + "</figure>")
    parts.append("</div>")
    parts.append("<h2>Utility</h2><p class=note>Loss per attribute: Iyengar's loss (share of the hierarchy's "
                 "leaves behind each released value; suppressed cells count 100 %). Relative score: 0 % = the "
                 "input, 100 % = every row suppressed.</p>")

    def pct(x: dict[str, Any], key: str) -> str:
        return "–" if x.get(key) is None else f"{x[key]:.1f} %"

    parts.append(_table(["attribute", "level", "of", "generalization", "loss", "distinct values in", "out"],
                        [[x["attribute"], x["level"], x.get("max_level", "–"), pct(x, "generalization_percent"),
                          pct(x, "loss_percent"), x.get("distinct_input", "–"), x["distinct_output"]]
                         for x in a.attributes], "attributes"))
    if a.metrics is not None:
        parts.append(_table(["metric", "input", "output", "everything suppressed", "relative"],
                            [[name, _num(m["input"], 6), _num(m["output"], 6), _num(m["all_suppressed"], 6),
                              "–" if m["relative_percent"] is None else f"{m['relative_percent']:.1f} %"]
                             for name, m in a.metrics.items()], "metrics"))
    else:
        parts.append("<p class=note id=metrics>Loss per attribute and relative scores need the pooled input: "
                     "not available.</p>")
    if s.get("aggregation"):
        parts.append("<h2>Aggregated attributes</h2><p class=note>Each released row carries its equivalence "
                     "class's aggregate (suppressed rows '*'). SSE/SST: squared differences between the values and "
                     "the released numbers (an interval's midpoint; a suppressed row: the overall mean) over the "
                     "squared deviations from the mean; 0 = nothing lost, 1 = no more than the overall mean.</p>")
        parts.append(_table(["attribute", "function", "classes", "released rows", "suppressed rows", "SSE/SST"],
                            [[name, x["function"], x.get("classes", "–"), x.get("released_rows", "–"),
                              x.get("suppressed_rows", "–"), _num(x.get("sse_sst"), 4)]
                             for name, x in s["aggregation"].items()], "aggregation"))
    parts.append("<h2>Value distributions before and after</h2><div class=grid>")
    for attr, d in a.distributions.items():
        parts.append(f'<figure class=distribution data-attribute="{_e(attr)}">'
                     + before_after(attr, d["input"], d["output"]) + "</figure>")
    parts.append("</div>")
    body = "\n".join(parts)
    return (f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
            f"<meta name=viewport content='width=device-width, initial-scale=1'><style>{STYLE}</style></head>"
            f"<body>\n{body}\n</body></html>\n")


def write_report(a: "Analysis", path: str | Path, title: str) -> None:
    text = render(a, title)
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from None
