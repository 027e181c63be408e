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

CLI_MARKER = "<!-- generated: cli-reference -->"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (mkdocs hook signature)
    if CLI_MARKER in markdown:
        return markdown.replace(CLI_MARKER, render())
    return markdown
