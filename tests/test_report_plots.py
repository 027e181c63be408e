"""The HTML report's SVG bar charts: well-formed, one bar per value, bar lengths proportional to
the values, labels shown as given (escaped, never interpreted as markup)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from fedanon.report.plots import INPUT_COLOR, OUTPUT_COLOR, before_after, nice_ticks, paired_bars

NS = "{http://www.w3.org/2000/svg}"


def bars(svg: str, color: str) -> list[ET.Element]:
    return [r for r in ET.fromstring(svg).iter(f"{NS}rect") if r.get("fill") == color
            and float(r.get("width", 0)) != 12]  # legend swatches are 12 wide


def texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{NS}text")]


def test_paired_bars_heights_follow_the_values_and_labels_are_escaped():
    labels = ["1", "2", "3-4", "<b>&x</b>"]
    before, after = [100, 0, 40, 7], [0, 50, 25, 100]
    svg = paired_bars("Records <by> size", labels, before, after)
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg" and svg.count("<svg") == 1
    blue, orange = bars(svg, INPUT_COLOR), bars(svg, OUTPUT_COLOR)
    assert len(blue) == len(orange) == len(labels)
    heights_in = [float(r.get("height")) for r in blue]
    heights_out = [float(r.get("height")) for r in orange]
    scale = heights_in[0] / 100
    assert heights_in == pytest.approx([v * scale for v in before])
    assert heights_out == pytest.approx([v * scale for v in after])
    bottoms = {round(float(r.get("y")) + float(r.get("height")), 6) for r in blue + orange}
    assert len(bottoms) == 1  # all bars stand on the axis
    shown = texts(svg)
    assert "<b>&x</b>" in shown and "Records <by> size" in shown and "input" in shown and "output" in shown


def test_output_only_and_before_after_panels():
    svg = paired_bars("risk", ["a", "b"], None, [3, 6])
    assert bars(svg, INPUT_COLOR) == [] and len(bars(svg, OUTPUT_COLOR)) == 2
    assert "input" not in texts(svg)
    data_in = [("Married-civ-spouse with a long name", 30), ("Never-married", 10)]
    data_out = [("*", 40)]
    svg = before_after("marital-status", data_in, data_out)
    widths_in = [float(r.get("width")) for r in bars(svg, INPUT_COLOR)]
    assert widths_in[0] == pytest.approx(3 * widths_in[1])
    assert len(bars(svg, OUTPUT_COLOR)) == 1
    shown = texts(svg)
    assert "Married-civ-spous…" in shown and "marital-status: input" in shown and "marital-status: output" in shown
    assert len(bars(before_after("x", None, data_out), INPUT_COLOR)) == 0


@pytest.mark.parametrize("top", [0, 1, 7, 10, 99, 101, 30162, 4_000_000])
def test_ticks_cover_the_largest_value_in_steps_of_1_2_5(top):
    ticks = nice_ticks(top)
    assert ticks[0] == 0 and ticks[-1] >= max(top, 1) and len(ticks) <= 7
    step = ticks[1] - ticks[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 9) in (1, 2, 5)
