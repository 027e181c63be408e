"""Render the privacy models' configuration keys as Markdown rows, from the model registry.

Why generated: a model is one module on the registry (fedanon/model/registry.py) and must not
need an edit of the manual to be documented; the documentation site calls these functions at
build time (`tools/docs_hooks.py`), so the reference lists exactly the registered models.
"""

from __future__ import annotations

import dataclasses

from fedanon.model.registry import model_types


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def run_file_rows() -> str:
    """One row per model for the run-file table: key, accepted values, meaning."""
    rows = []
    for key, model in model_types().items():
        fields = [f.name for f in dataclasses.fields(model) if f.name != "attribute"]
        shape = f'string `"{model.metavar}"` (as `{model.flag}`), or table `{{{", ".join(fields)}}}`'
        if model.needs_subset:
            shape = f'string `"{model.metavar}"` (as `{model.flag}`), or table `{{{", ".join(fields + ["subset"])}}}`'
        rows.append(f"| `{key}` | {_cell(shape)} | none | {_cell(model.help)} |")
    return "\n".join(rows)


def privacy_section_rows() -> str:
    """One row per model for a coordinator's `[privacy]` section (the JSON shape every party gets)."""
    rows = []
    for key, model in model_types().items():
        fields = ", ".join(f.name for f in dataclasses.fields(model))
        where = " (the research subset comes from the parties' `subset_column`)" if model.needs_subset else ""
        rows.append(f"| `[privacy] {key}` | table `{{{fields}}}` | none | {_cell(model.help)}{where} |")
    return "\n".join(rows)
