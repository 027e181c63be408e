"""The HTML report renders in real headless Chromium; a screenshot is taken and checked.

Chromium is the Debian package `chromium` (`.ci/run` installs it when it runs as
root); without it these tests skip and say why. The page must be
self-contained (no external resource), every section and plot must be in the
rendered DOM, the browser must log no console or resource errors, and the
screenshot must show content (not a blank page).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fedanon.cli import main

from datasets import ADULT_DIR
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
SHOTS = Path(os.environ.get("FEDANON_SCREENSHOT_DIR", "")) if os.environ.get("FEDANON_SCREENSHOT_DIR") else None


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("headless browser not found: no chromium/chromium-browser/google-chrome on PATH "
                "(Debian: apt-get install chromium; .ci/run does this when run as root)")


def browse(html: Path, *flags: str, tmp: Path) -> subprocess.CompletedProcess:
    profile = tmp / "profile"
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-extensions", "--no-first-run",
           f"--user-data-dir={profile}", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
           *flags, html.resolve().as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def adult_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("html")
    html, rep = tmp / "report.html", tmp / "report.json"
    args = ["anonymize", str(ADULT_DIR / "adult.csv")]
    for q in QIS:
        args += ["--qi", f"{q}={ADULT_DIR / f'adult_hierarchy_{q}.csv'}"]
    args += ["--sensitive", f"salary-class={ADULT_DIR / 'adult_hierarchy_salary-class.csv'}",
             "--k", "5", "--l-diversity", "distinct:2", "--suppression", "0.02", "--verify",
             "--output", str(tmp / "out.csv"), "--report", str(rep), "--html", str(html), "--quiet"]
    assert main(args) == 0
    return html, json.loads(rep.read_text())


def test_html_is_self_contained_and_states_the_figures(adult_report):
    html, report = adult_report
    text = html.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text), "page loads an external resource"
    assert "<script" not in text
    out = report["risk"]["output"]
    assert f"<td>{out['classes']}</td>" in text and f"<td>{out['sample_uniques']}</td>" in text
    assert text.count("<svg") == 2 + len(QIS) + 1  # class sizes, risk profile, one per QI + sensitive


def test_html_renders_in_headless_chromium_with_screenshot(adult_report, tmp_path):
    html, report = adult_report
    dom = browse(html, "--dump-dom", tmp=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = dom.stdout
    for section in ('id="summary"', 'id="risk"', 'id="attributes"', 'id="metrics"', 'id="class-sizes"',
                    'id="risk-profile"'):
        assert section in rendered, section
    assert rendered.count("<svg") == 2 + len(QIS) + 1
    errors = [line for line in dom.stderr.splitlines()
              if "CONSOLE" in line or "Failed to load" in line or "Uncaught" in line or "net::ERR" in line]
    assert errors == [], errors[:5]

    shot = (SHOTS or tmp_path) / "report.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    result = browse(html, f"--screenshot={shot}", "--window-size=1200,2400", tmp=tmp_path)
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    from matplotlib.image import imread

    pixels = imread(str(shot))
    assert pixels.shape[0] == 2400 and pixels.shape[1] == 1200
    # content, not a blank page: many distinct colours (text, tables, both plot colours)
    flat = (pixels[..., :3] * 255).astype(int).reshape(-1, 3)
    colours = {tuple(c) for c in flat[:: 97]}
    assert len(colours) > 50
    orange = ((flat[:, 0] > 230) & (flat[:, 1] > 120) & (flat[:, 1] < 160) & (flat[:, 2] < 120)).sum()
    blue = ((flat[:, 2] > 180) & (flat[:, 0] < 160) & (flat[:, 1] < 180)).sum()
    assert orange > 500 and blue > 500, "the plots (input blue, output orange) are not visible"
