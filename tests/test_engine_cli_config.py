"""Run configuration: flags and TOML files become the same AnonymizationConfig."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from fedanon.cli.kit.runconfig import add_privacy_arguments, config_from_args, run_from_args
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.model.privacy.presence import DeltaPresence
from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.model.registry import ParseContext

parse_l_diversity = LDiversity.parse_text
parse_t_closeness = TCloseness.parse_text


def parse_delta_presence(text: str) -> tuple[DeltaPresence, Path]:
    ctx = ParseContext()
    model = DeltaPresence.parse(text, ctx)
    return model, ctx.files["subset"]
from fedanon.errors import InputError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("input", nargs="?")
    p.add_argument("--output")
    p.add_argument("--report")
    p.add_argument("--drop-suppressed", action="store_true")
    add_privacy_arguments(p)
    return p


def test_model_strings():
    assert parse_l_diversity("distinct:3", "s") == LDiversity("distinct", 3.0, "s")
    assert parse_l_diversity("entropy:1.5", "s") == LDiversity("entropy", 1.5, "s")
    assert parse_l_diversity("recursive:4,3", "s") == LDiversity("recursive", 3.0, "s", 4.0)
    assert parse_t_closeness("0.2:hierarchical", "s") == TCloseness(0.2, "hierarchical", "s")
    assert parse_t_closeness("0.3", "s") == TCloseness(0.3, "equal", "s")
    d, path = parse_delta_presence("0.05,0.15:sub.csv")
    assert d == DeltaPresence(0.05, 0.15) and path == Path("sub.csv")
    for bad, fn in (("recursive:4", parse_l_diversity), ("recursive:4,2.5", parse_l_diversity),
                    ("distinct", parse_l_diversity), ("x:equal", parse_t_closeness),
                    ("0.2:manhattan", parse_t_closeness)):
        with pytest.raises(InputError):
            fn(bad, "s")
    with pytest.raises(InputError, match="DMIN,DMAX:SUBSET.csv"):
        parse_delta_presence("0.1:sub.csv")


def test_flags_build_a_validated_config():
    args = _parser().parse_args(["in.csv", "--qi", "a=ha.csv", "--qi", "b=hb.csv", "--sensitive", "s=hs.csv",
                                 "--k", "3", "--l-diversity", "recursive:4,2", "--t-closeness", "0.2:hierarchical",
                                 "--suppression", "0.05", "--metric", "aecs"])
    cfg, paths, sensitive, subset = config_from_args(args)
    assert cfg.quasi_identifiers == ["a", "b"] and cfg.k == 3 and cfg.metric == "aecs"
    assert cfg.l_diversity == LDiversity("recursive", 2.0, "s", 4.0)
    assert cfg.t_closeness == TCloseness(0.2, "hierarchical", "s")
    assert paths == {"a": Path("ha.csv"), "b": Path("hb.csv"), "s": Path("hs.csv")}
    assert sensitive == "s" and subset is None


def test_toml_tables_and_strings_are_equivalent(tmp_path):
    (tmp_path / "a.toml").write_text(
        'input = "in.csv"\noutput = "out.csv"\nk = 2\nsuppression = 0.1\n'
        '[qi]\nage = "h/age.csv"\n[sensitive]\nname = "s"\nhierarchy = "h/s.csv"\n'
        '[l_diversity]\nvariant = "recursive"\nc = 4\nl = 3\n'
        '[t_closeness]\nt = 0.2\nkind = "hierarchical"\n'
        '[delta_presence]\ndmin = 0.0\ndmax = 0.5\nsubset = "sub.csv"\n')
    (tmp_path / "b.toml").write_text(
        'input = "in.csv"\noutput = "out.csv"\nk = 2\nsuppression = 0.1\n'
        'sensitive = "s=h/s.csv"\nl_diversity = "recursive:4,3"\nt_closeness = "0.2:hierarchical"\n'
        'delta_presence = "0,0.5:sub.csv"\n[qi]\nage = "h/age.csv"\n')
    specs = [run_from_args(_parser().parse_args(["--config", str(tmp_path / f"{n}.toml")])) for n in "ab"]
    assert specs[0].privacy.config == specs[1].privacy.config
    a = specs[0]
    assert a.input == tmp_path / "in.csv" and a.output == tmp_path / "out.csv"
    assert a.privacy.hierarchy_paths == {"age": tmp_path / "h/age.csv", "s": tmp_path / "h/s.csv"}
    assert a.privacy.subset_path == tmp_path / "sub.csv"
    # flags override the file; --qi replaces the whole QI list
    over = run_from_args(_parser().parse_args(["--config", str(tmp_path / "a.toml"), "--k", "7",
                                               "--qi", "zip=z.csv", "other.csv"]))
    assert over.privacy.config.k == 7 and over.privacy.config.quasi_identifiers == ["zip"]
    assert over.input == Path("other.csv")


@pytest.mark.parametrize("text,needle", [
    ('k = 2\n', "no quasi-identifiers"),
    ('bogus = 1\n[qi]\na = "h.csv"\n', "unknown setting"),
    ('k = 0\n[qi]\na = "h.csv"\n', "k must be"),
    ('suppression = 1.5\n[qi]\na = "h.csv"\n', "suppression"),
    ('metric = "fast"\n[qi]\na = "h.csv"\n', "unknown metric"),
    ('l_diversity = "distinct:2"\n[qi]\na = "h.csv"\n', "sensitive"),
    ('k = \n', "not valid TOML"),
])
def test_toml_errors_are_clear(tmp_path, text, needle):
    path = tmp_path / "run.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=needle):
        run_from_args(_parser().parse_args(["--config", str(path)]))


def test_config_from_args_tolerates_other_commands_keys(tmp_path):
    """`fedanon simulate` & co. may keep their own keys next to the privacy model."""
    path = tmp_path / "run.toml"
    path.write_text('parties = 3\nk = 4\n[qi]\na = "h.csv"\n')
    p = argparse.ArgumentParser()
    add_privacy_arguments(p)
    cfg, paths, sensitive, subset = config_from_args(p.parse_args(["--config", str(path)]))
    assert cfg.k == 4 and paths == {"a": tmp_path / "h.csv"} and sensitive is None and subset is None
    with pytest.raises(InputError, match="unknown setting"):
        config_from_args(p.parse_args(["--config", str(path)]), strict=True)
