"""The generated CLI reference shows every subcommand and every flag the parser defines."""

from __future__ import annotations

import argparse

from fedanon.cli import build_parser
from tools.cli_reference import render


def _walk(parser: argparse.ArgumentParser, path: str):  # noqa: ANN202 (generator of (path, parser))
    yield path, parser
    for action in parser._actions:  # argparse has no public walk over subcommands
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, f"{path} {name}")


def test_every_command_and_flag_is_in_the_reference() -> None:
    text = render()
    missing = []
    for path, parser in _walk(build_parser(), "fedanon"):
        if path != "fedanon" and f"`{path}`" not in text:
            missing.append(path)
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help") and action.help != argparse.SUPPRESS and f"`{option}`" not in text:
                    missing.append(f"{path} {option}")
    assert not missing, missing


def test_defaults_and_choices_come_from_the_parser() -> None:
    text = render()
    assert "`{A,B,C}`" in text and "one of `horizontal`, `vertical`" in text
