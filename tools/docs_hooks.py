"""mkdocs hook: fill generated sections of the manual at build time.

Why a hook instead of a committed page: the CLI reference must follow the argparse definitions
of the checkout being built, so a page holds only a marker and the text is made when the site is
built (`mkdocs build`, `mkdocs serve`).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # mkdocs loads hooks by path; make this checkout's fedanon importable
    sys.path.insert(0, str(ROOT))

from tools.cli_reference import render  # noqa: E402  (needs the path above)
from tools.model_reference import privacy_section_rows, run_file_rows  # noqa: E402

CLI_MARKER = "<!-- generated: cli-reference -->"
# markers inside tables: replaced by rows, so they sit on a line of their own within the table
GENERATED = {
    CLI_MARKER: render,
    "<!-- generated: run-file-models -->": run_file_rows,
    "<!-- generated: privacy-models -->": privacy_section_rows,
}


def expand(markdown: str) -> str:
    """The page with every generated section filled in (what the site shows)."""
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (mkdocs hook signature)
    return expand(markdown)
