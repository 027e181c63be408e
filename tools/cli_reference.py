"""Render the `fedanon` command line as Markdown, straight from its argparse definitions.

Why generated: a hand-copied flag table drifts from the parser the day a flag is added or a
default changes. The documentation site calls `render()` at build time (`tools/docs_hooks.py`),
so the CLI reference page always shows what `fedanon --help` would show for this checkout.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from fedanon.cli import build_parser

HELP_SUPPRESS = argparse.SUPPRESS


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) for every subcommand of `parser`, in registration order."""
    for action in parser._actions:  # argparse offers no public walk over subcommands
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _escape(text: str) -> str:
    """Table-cell text: pipes and line breaks would break the Markdown table."""
    return " ".join(text.replace("|", "\\|").split())


def _flag_cell(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    names = ", ".join(f"`{o}`" for o in action.option_strings)
    if action.nargs == 0:
        return names
    if action.metavar is not None:
        metavar = action.metavar
    elif action.choices is not None:
        metavar = "{" + ",".join(str(c) for c in action.choices) + "}"  # as argparse's usage shows it
    else:
        metavar = action.dest.upper()
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    return f"{names} `{metavar}`"


def _help_cell(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": "fedanon", "default": action.default}
    extras = []
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        extras.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    if action.required and action.option_strings:
        extras.append("required")
    default = action.default
    if (action.option_strings and default not in (None, False, argparse.SUPPRESS, [])
            and action.nargs != 0 and "default" not in text):
        extras.append(f"default `{default}`")
    if extras:
        text = (text + " (" + "; ".join(extras) + ")") if text else "; ".join(extras)
    return _escape(text) or "—"


def _arguments_table(parser: argparse.ArgumentParser) -> list[str]:
    lines: list[str] = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if a.help != HELP_SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
        if not actions:
            continue
        title = group.title or "arguments"
        lines += ["", f"*{title}*", "", "| argument | meaning |", "|---|---|"]
        lines += [f"| {_flag_cell(a)} | {_help_cell(a)} |" for a in actions]
    return lines


def _command(path: str, parser: argparse.ArgumentParser, help_text: str, depth: int) -> list[str]:
    usage = " ".join(parser.format_usage().split())
    usage = usage.removeprefix("usage: ")
    lines = ["", f"{'#' * depth} `{path}`", ""]
    if help_text:
        lines += [_escape(help_text), ""]
    if parser.description and parser.description != help_text:
        lines += [" ".join(parser.description.split()), ""]
    lines += ["```text", usage, "```"]
    subs = list(_subparsers(parser))
    lines += _arguments_table(parser)
    for name, sub_help, sub in subs:
        lines += _command(f"{path} {name}", sub, sub_help, min(depth + 1, 4))
    return lines


def render() -> str:
    """The whole CLI reference: one section per command and subcommand."""
    parser = build_parser()
    lines = [f"Generated from `fedanon.cli.build_parser()`; the same text as `fedanon COMMAND --help`.", ""]
    lines += ["| command | what it does |", "|---|---|"]
    for name, help_text, _sub in _subparsers(parser):
        lines.append(f"| [`fedanon {name}`](#fedanon-{name}) | {_escape(help_text)} |")
    lines += _arguments_table(parser)  # the options of `fedanon` itself (e.g. --version)
    for name, help_text, sub in _subparsers(parser):
        lines += _command(f"fedanon {name}", sub, help_text, 2)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render())
