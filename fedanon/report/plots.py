"""Plots for the HTML report as inline SVG, written directly (bar charts only).

Why not a plotting library: the report draws eleven small bar charts; laying out and
rendering them with matplotlib took several times the whole anonymization of a
30,000-row table (most of it text-extent layout, plus importing it), so `--html`
tripled a run's time. Bars, axes, ticks and labels are a few SVG elements each;
written here they cost milliseconds and the page stays self-contained (no fonts or
scripts; text uses the page's font).
"""

from __future__ import annotations

import html
import math
from typing import Sequence

INPUT_COLOR = "#8da0cb"
OUTPUT_COLOR = "#fc8d62"
DPI = 96  # sizes are given in inches, as the report's layout was designed
AXIS = "#444"
FONT = "font-family:system-ui,-apple-system,Segoe UI,sans-serif"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """0 and steps of 1, 2 or 5 × 10^k up to at least `top` (about `count` ticks)."""
    top = max(float(top), 1.0)
    raw = top / max(count - 1, 1)
    base = 10.0 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 5, 10) if m * base >= raw)
    n = int(math.ceil(top / step - 1e-9))
    return [i * step for i in range(n + 1)]


def _tick_label(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e4:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def _svg(width: float, height: float, title: str, body: list[str]) -> str:
    w, h = round(width * DPI), round(height * DPI)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'role="img" aria-label="{_e(title)}" style="{FONT}"><title>{_e(title)}</title>'
            f'<rect width="{w}" height="{h}" fill="#fff"/>' + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, size: float, anchor: str = "middle", extra: str = "") -> str:
    return (f'<text x="{_fmt(x)}" y="{_fmt(y)}" font-size="{size:g}" text-anchor="{anchor}" fill="#222"'
            f'{extra}>{_e(text)}</text>')


def _rect(x: float, y: float, w: float, h: float, color: str) -> str:
    return f'<rect x="{_fmt(x)}" y="{_fmt(y)}" width="{_fmt(max(w, 0.0))}" height="{_fmt(max(h, 0.0))}" fill="{color}"/>'


def _line(x1: float, y1: float, x2: float, y2: float) -> str:
    return f'<line x1="{_fmt(x1)}" y1="{_fmt(y1)}" x2="{_fmt(x2)}" y2="{_fmt(y2)}" stroke="{AXIS}" stroke-width="1"/>'


def paired_bars(title: str, labels: Sequence[str], before: Sequence[float] | None, after: Sequence[float],
                ylabel: str = "records", width: float = 5.3, height: float = 3.0) -> str:
    """Two bar series (input vs output) over the same categories; the output alone when `before` is None."""
    w, h = width * DPI, height * DPI
    rotate = len(labels) > 6
    left, right, top, bottom = 62.0, 12.0, 30.0, (62.0 if rotate else 30.0)
    plot_w, plot_h = w - left - right, h - top - bottom
    ticks = nice_ticks(max([0.0, *after, *(before or [])]))
    scale = plot_h / ticks[-1]
    body = [_text(w / 2, 18, title, 13)]
    for t in ticks:
        y = top + plot_h - t * scale
        body.append(_line(left - 4, y, left, y))
        body.append(_text(left - 7, y + 4, _tick_label(t), 10, "end"))
    body.append(_text(16, top + plot_h / 2, ylabel, 11, extra=f' transform="rotate(-90 16 {_fmt(top + plot_h / 2)})"'))
    slot = plot_w / max(len(labels), 1)
    series = ([(before, INPUT_COLOR, -0.2)] if before is not None else []) + \
             [(after, OUTPUT_COLOR, 0.2 if before is not None else 0.0)]
    bar = slot * (0.4 if before is not None else 0.6)
    for values, color, offset in series:
        for i, v in enumerate(values):
            cx = left + slot * (i + 0.5 + offset)
            body.append(_rect(cx - bar / 2, top + plot_h - v * scale, bar, v * scale, color))
    for i, label in enumerate(labels):
        x, y = left + slot * (i + 0.5), top + plot_h + 14
        body.append(_text(x, y, label, 10, "end", f' transform="rotate(-30 {_fmt(x)} {_fmt(y)})"') if rotate
                    else _text(x, y, label, 10))
    body.append(_line(left, top, left, top + plot_h))
    body.append(_line(left, top + plot_h, left + plot_w, top + plot_h))
    legend = [("input", INPUT_COLOR)] * (before is not None) + [("output", OUTPUT_COLOR)]
    for j, (name, color) in enumerate(legend):  # in the top margin, right of the title: never on a bar
        x = w - right - 62 * (len(legend) - j)
        body.append(_rect(x, 9, 12, 9, color))
        body.append(_text(x + 16, 17, name, 10, "start"))
    return _svg(width, height, title, body)


def before_after(attribute: str, before: Sequence[tuple[str, int]] | None, after: Sequence[tuple[str, int]]) -> str:
    """Value distribution of one attribute: input values left, output values right (output alone: no input)."""
    panels = ([(before, "input", INPUT_COLOR)] if before is not None else []) + [(after, "output", OUTPUT_COLOR)]
    width, height = (7.2 if len(panels) == 2 else 3.8), 2.8
    w, h = width * DPI, height * DPI
    panel_w = w / len(panels)
    body: list[str] = []
    for p, (data, name, color) in enumerate(panels):
        x0 = p * panel_w
        left, right, top, bottom = x0 + 100.0, 12.0, 24.0, 22.0
        plot_w, plot_h = x0 + panel_w - right - left, h - top - bottom
        body.append(_text(x0 + panel_w / 2 + 44, 15, f"{attribute}: {name}", 12))
        ticks = nice_ticks(max([0, *(n for _, n in data)]), 4)
        scale = plot_w / ticks[-1]
        for t in ticks:
            x = left + t * scale
            body.append(_line(x, top + plot_h, x, top + plot_h + 4))
            body.append(_text(x, top + plot_h + 14, _tick_label(t), 9))
        slot = plot_h / max(len(data), 1)
        for i, (value, n) in enumerate(data):  # first value at the top
            y = top + slot * i
            body.append(_rect(left, y + slot * 0.1, n * scale, slot * 0.8, color))
            label = value if len(value) <= 18 else value[:17] + "…"
            body.append(_text(left - 5, y + slot / 2 + 3, label, 9, "end"))
        body.append(_line(left, top, left, top + plot_h))
        body.append(_line(left, top + plot_h, left + plot_w, top + plot_h))
    return _svg(width, height, f"{attribute}: value distribution", body)
