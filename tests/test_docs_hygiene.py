"""The user documentation describes the software, never how it was built.

README.md and every page under docs/ may not name a work period ("session 7"), an issue
("issue 14", "#14"), a commit hash or a clock time; only the changelog and the performance
archive record history. The README stays a front page (<= 150 lines) that links into the manual.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
HISTORY_PAGES = {DOCS / "changelog.md", DOCS / "performance" / "archive.md"}
README_MAX_LINES = 150

FORBIDDEN = {
    "work period": re.compile(r"\bsessions?\s+\d", re.IGNORECASE),
    "issue number": re.compile(r"\bissues?\s+#?\d+|(?<![\w&/])#\d+\b", re.IGNORECASE),
    # a commit-like token: 7-40 hex digits holding at least one digit and one letter
    "commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"),
    # an all-digit hash is told from a number by the words around it
    "commit reference": re.compile(r"\b(?:commit|main at|engine of|against)\s+\d{7,40}\b", re.IGNORECASE),
    "clock time": re.compile(r"\b\d\d:\d\d(?::\d\d)?\s*UTC\b"),
}


def _user_pages() -> list[Path]:
    pages = [ROOT / "README.md"] + sorted(DOCS.rglob("*.md"))
    return [p for p in pages if p not in HISTORY_PAGES]


RESULTS_FILE = re.compile(r"bench/results/\S+")  # a results file's name carries its date and commit by design


def _findings(text: str) -> list[str]:
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        line = RESULTS_FILE.sub("bench/results/FILE", line)
        for what, pattern in FORBIDDEN.items():
            match = pattern.search(line)
            if match:
                out.append(f"line {number}: {what} {match.group(0)!r}")
    return out


@pytest.mark.parametrize("page", _user_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_page_does_not_narrate_its_making(page: Path) -> None:
    findings = _findings(page.read_text(encoding="utf-8"))
    assert not findings, f"{page.relative_to(ROOT)}: " + "; ".join(findings[:10])


def test_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"


@pytest.mark.parametrize("text", [
    "measured in session 11", "see issue 14", "fixed in #27", "main at 8710108", "at 20:28 UTC",
    "commit f8c5e00d2a", "Sessions 9 and 10",
])
def test_the_rules_catch_history(text: str) -> None:
    assert _findings(text), text


@pytest.mark.parametrize("text", [
    "Python 3.11.7", "30,162 rows", "port 50051", "k = 5", "[link](#fedanon-run)", "the sessionless daemon",
    "SHA-256 fingerprint", "1200000 rows", "a 12:00 meeting",
])
def test_the_rules_spare_ordinary_text(text: str) -> None:
    assert not _findings(text), text


def test_readme_first_command_installs_and_runs_the_demo() -> None:
    """A newcomer's first command: install and run the demo; the second installs and runs the tests."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    assert commands, "README.md shows no command"
    assert "pip install -e . && fedanon demo" in commands[0], commands[0]
    assert "pip install -e '.[test]' && python -m pytest" in commands[1], commands[1]


def test_results_files_are_cited_and_listed() -> None:
    """bench/results/ keeps exactly the files the performance pages cite, each in the manifest."""
    results = ROOT / "bench" / "results"
    kept = {p.name for p in results.glob("*.json")}
    page = "\n".join(p.read_text(encoding="utf-8") for p in sorted((DOCS / "performance").glob("*.md"))
                      if p.name != "archive.md")
    cited = set(re.findall(r"bench/results/([\w.-]+\.json)", page))
    assert cited - kept == set(), f"the performance page cites missing files: {sorted(cited - kept)}"
    assert kept - cited == set(), f"files nobody cites (archive them): {sorted(kept - cited)}"
    manifest = (results / "MANIFEST.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in manifest for name in kept), "a kept file is missing from MANIFEST.md"
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d_[0-9a-f]{7}_[a-z0-9]+_[\w.-]+\.json", name) for name in kept), kept
