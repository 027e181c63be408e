"""Plots for the HTML report as inline SVG (matplotlib's object API: no pyplot, no global state)."""

from __future__ import annotations

import io
from typing import Sequence

from fedanon.errors import FedanonError
from fedanon.kit.optional import MISSING_MATPLOTLIB

INPUT_COLOR = "#8da0cb"
OUTPUT_COLOR = "#fc8d62"


def _figure(width: float, height: float):  # type: ignore[no-untyped-def]
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise FedanonError(MISSING_MATPLOTLIB) from None
    return Figure(figsize=(width, height), dpi=96, layout="constrained")


def _svg(fig) -> str:  # type: ignore[no-untyped-def]
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "fedanon"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog: the SVG is inlined into HTML


def paired_bars(title: str, labels: Sequence[str], before: Sequence[float] | None, after: Sequence[float],
                ylabel: str = "records", width: float = 5.3, height: float = 3.0) -> str:
    """Two bar series (input vs output) over the same categories; the output alone when `before` is None."""
    fig = _figure(width, height)
    ax = fig.add_subplot()
    x = list(range(len(labels)))
    if before is not None:
        ax.bar([i - 0.2 for i in x], before, width=0.4, label="input", color=INPUT_COLOR)
    ax.bar([i + 0.2 if before is not None else i for i in x], after, width=0.4 if before is not None else 0.6,
           label="output", color=OUTPUT_COLOR)
    ax.set_xticks(x, labels, rotation=30 if len(labels) > 6 else 0, ha="right" if len(labels) > 6 else "center",
                  fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def before_after(attribute: str, before: Sequence[tuple[str, int]] | None, after: Sequence[tuple[str, int]]) -> str:
    """Value distribution of one attribute: input values left, output values right (output alone: no input)."""
    panels = ([(before, "input", INPUT_COLOR)] if before is not None else []) + [(after, "output", OUTPUT_COLOR)]
    fig = _figure(7.2 if len(panels) == 2 else 3.8, 2.8)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (data, name, color) in zip(axes, panels):
        labels = [(v if len(v) <= 18 else v[:17] + "…") for v, _ in data][::-1]
        ax.barh(range(len(data)), [n for _, n in data][::-1], color=color)
        ax.set_yticks(range(len(data)), labels, fontsize=7)
        ax.set_title(f"{attribute}: {name}", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)
