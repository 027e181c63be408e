"""Every shell command block of the manual and the README runs, or says why it cannot.

A ```bash block either carries a `<!-- norun: REASON -->` comment on the line before it, or it is
run: all runnable blocks of one page in order, in one bash process (so a `cd` or a variable carries
over, as for a reader following the page), in a fresh folder that holds a copy of the bundled data
at `fedanon/data/`. `fedanon` is this checkout's `python -m fedanon`, `python3` the test's
interpreter, and `/tmp` the fresh folder, so a page cannot drift from the code without a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[ \t]*$")
NORUN = re.compile(r"<!--\s*norun:\s*(?P<reason>[^>]*?)\s*-->")
SHELLS = {"bash", "sh", "shell", "console"}
# pages whose blocks start daemons or run protocols: longer, still in the default suite
SLOW_PAGES = {"quickstart.md", "protocols/a.md", "protocols/b.md", "protocols/c.md", "protocols/index.md",
              "protocols/hybrid.md",
              "protocols/baselines.md", "README.md"}


class Block:
    def __init__(self, page: Path, line: int, lang: str, text: str, norun: str | None) -> None:
        self.page, self.line, self.lang, self.text, self.norun = page, line, lang, text, norun


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page (indented fences in list items included)."""
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group("lang"):
            i += 1
            continue
        indent, start = m.group("indent"), i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        norun = NORUN.search(before)
        out.append(Block(page, start + 1, m.group("lang"), "\n".join(body), norun.group("reason") if norun else None))
        i += 1
    return out


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT / "docs")) if page.parent != ROOT else page.name


def _shell_pages() -> list[Path]:
    return [p for p in PAGES if any(b.lang in SHELLS for b in blocks(p))]


def test_every_shell_block_runs_or_says_why_not() -> None:
    unmarked = [f"{b.page.relative_to(ROOT)}:{b.line} (```{b.lang})" for p in PAGES for b in blocks(p)
                if b.lang in {"sh", "shell", "console"}]
    assert not unmarked, "use ```bash for commands (or ```text for output): " + ", ".join(unmarked)
    empty = [f"{b.page.relative_to(ROOT)}:{b.line}" for p in PAGES for b in blocks(p)
             if b.norun is not None and len(b.norun) < 8]
    assert not empty, "a norun marker needs a reason: " + ", ".join(empty)
    runnable = sum(1 for p in PAGES for b in blocks(p) if b.lang == "bash" and b.norun is None)
    assert runnable >= 15, f"only {runnable} runnable command blocks: the docs stopped being executable"


def _script(page: Path, work: Path) -> str:
    parts = ["set -euo pipefail",
             f'fedanon() {{ "{sys.executable}" -m fedanon "$@"; }}',
             f'python3() {{ "{sys.executable}" "$@"; }}',
             f'python() {{ "{sys.executable}" "$@"; }}',
             "export -f fedanon python3 python"]
    tmp = str(work / "tmp")
    for b in blocks(page):
        if b.lang != "bash" or b.norun is not None:
            continue
        text = re.sub(r"(?<![\w./-])/tmp\b", tmp, b.text)
        parts.append(f"echo '>>> {_rel(page)}:{b.line}' >&2")
        parts.append(text)
    return "\n".join(parts) + "\n"


def _params() -> list:
    out = []
    for page in _shell_pages():
        marks = [pytest.mark.slow] if _rel(page) in SLOW_PAGES else []
        out.append(pytest.param(page, id=_rel(page), marks=marks))
    return out


@pytest.mark.parametrize("page", _params())
def test_the_commands_of_a_page_run(page: Path, tmp_path: Path) -> None:
    if not any(b.lang == "bash" and b.norun is None for b in blocks(page)):
        pytest.skip(f"{_rel(page)}: every command block is marked norun, with its reason")
    shutil.copytree(ROOT / "fedanon" / "data", tmp_path / "fedanon" / "data")
    (tmp_path / "tmp").mkdir()
    script = tmp_path / "page.sh"
    script.write_text(_script(page, tmp_path), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    proc = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    blocks_run = re.findall(r">>> (\S+)", proc.stderr)
    where = blocks_run[-1] if blocks_run else _rel(page)
    assert proc.returncode == 0, f"block at {where} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def test_the_extractor_sees_indented_blocks_and_markers(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("1. step\n   <!-- norun: needs a daemon -->\n   ```bash\n   fedanon party serve\n   ```\n"
                    "```bash\nfedanon --help\n```\n```text\nout\n```\n", encoding="utf-8")
    found = blocks(page)
    assert [(b.lang, b.text, b.norun) for b in found] == [
        ("bash", "fedanon party serve", "needs a daemon"), ("bash", "fedanon --help", None), ("text", "out", None)]
