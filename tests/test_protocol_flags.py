"""Protocols' command-line flags come from their registry specs; cli/ and parties/ name no protocol.

`fedanon simulate` adds each protocol's `OptionFlag`s from its `ProtocolSpec` and turns them into
run options through one function; the same options keep working from a run file's `[options]`.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

import fedanon
from fedanon.cli import main
from fedanon.cli.kit.protocolflags import add_protocol_flags, protocol_flag_options
from fedanon.data.hierarchy import Hierarchy
from fedanon.errors import InputError
from fedanon.parties.config import load_run_config
from fedanon.protocols.c.flags import COUNTER_CHOICES
from fedanon.protocols.c.protocol import COUNTER_SCHEMES
from fedanon.protocols.registry import PARTY_ROLES, available_protocols, option_flags, protocol_spec

from datasets import EXAMPLE_DIR as EXAMPLE

QIS = ["age", "sex", "zipcode"]
PACKAGE = Path(fedanon.__file__).parent
# a leftover of the demo command that is rewritten apart from this change (its C-only sample)
KNOWN_LEFTOVERS: set[tuple[str, str]] = set()


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_protocol_flags(parser)
    return parser.parse_args(list(argv))


def _hierarchies() -> dict[str, Hierarchy]:
    return {q: Hierarchy.read_csv(EXAMPLE / f"example_hierarchy_{q}.csv", q) for q in QIS}


def test_every_flag_sets_an_option_its_protocol_reads():
    for name in available_protocols():
        spec = protocol_spec(name)
        for flag in spec.flags:
            assert flag.option in spec.options, (name, flag.flag)
    assert set(COUNTER_CHOICES) == set(COUNTER_SCHEMES)
    assert {"--cipher", "--min-level", "--verified", "--counters", "--pseudotuples"} <= set(option_flags())


def test_flags_become_the_options_of_the_chosen_protocol_only():
    h = _hierarchies()
    args = _parse("--cipher", "ph", "--min-level", "age=1", "--verified")
    assert protocol_flag_options(args, "A", QIS, h) == {"cipher": "ph", "receive_timeout_s": 6 * 3600.0,
                                                       "min_levels": {"age": 1}, "verified": True}
    # A's defaults travel explicitly, so every party reads the same options
    assert protocol_flag_options(_parse(), "A", QIS, h) == {"cipher": "ec", "verified": False}
    assert protocol_flag_options(_parse("--counters", "elgamal", "--pseudotuples", "0.5"), "C", QIS, h) == \
        {"counters": "elgamal", "pseudotuples": 0.5}
    assert protocol_flag_options(_parse(), "B", QIS, h) == {}
    with pytest.raises(InputError, match=r"--verified applies only to --protocol A .*not of Protocol C"):
        protocol_flag_options(_parse("--verified"), "C", QIS, h)
    with pytest.raises(InputError, match=r"--counters applies only to --protocol C"):
        protocol_flag_options(_parse("--counters", "elgamal"), "A", QIS, h)


def test_the_simulate_help_groups_the_flags_under_their_protocol(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    out = capsys.readouterr().out
    for name in ("A", "C"):
        spec = protocol_spec(name)
        section = out.split(f"Protocol {spec.name} (")[1].split("\n\n")[0]
        for flag in spec.flags:
            assert flag.flag in section, (name, flag.flag)


def test_run_file_options_keep_their_keys(tmp_path: Path):
    """[options] of a run file reach the parties as written; the keys are those the specs declare."""
    run = tmp_path / "run.toml"
    run.write_text("""
[run]
protocol = "A"
[coordinator]
name = "coordinator"
cert = "c.crt"
key = "c.key"
ca = "ca.crt"
[parties.p1]
address = "127.0.0.1:1"
role = "primary"
[parties.p2]
address = "127.0.0.1:2"
role = "primary"
[privacy]
quasi_identifiers = ["age"]
k = 2
[options]
cipher = "ph"
verified = true
min_levels = { age = 1 }
""")
    cfg = load_run_config(run)
    assert cfg.options == {"cipher": "ph", "verified": True, "min_levels": {"age": 1}}
    assert set(cfg.options) <= set(protocol_spec(cfg.protocol).options)


def test_the_flags_drive_an_in_memory_run(tmp_path: Path):
    qi = [f"--qi={q}={EXAMPLE / f'example_hierarchy_{q}.csv'}" for q in QIS]
    base = ["simulate", str(EXAMPLE / "example.csv"), *qi, "--k", "2", "-q", "--in-memory"]
    rep = tmp_path / "a.json"
    assert main([*base, "--protocol", "A", "--min-level", "age=1", "--output", str(tmp_path / "a.csv"),
                 "--report", str(rep)]) == 0
    report = json.loads(rep.read_text())
    assert report["transformation"]["age"] >= 1 and all(r["cipher"] == "ec" for r in report["party_reports"].values())


def _string_constants(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_cli_and_parties_spell_no_protocol_and_no_role():
    names = set(available_protocols()) | set(PARTY_ROLES)
    found = []
    for folder in ("cli", "parties"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            rel = path.relative_to(PACKAGE).as_posix()
            found += [(rel, text) for text in _string_constants(path)
                      if text in names and (rel, text) not in KNOWN_LEFTOVERS]
    assert found == []
