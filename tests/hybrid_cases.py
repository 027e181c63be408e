"""Hybrid layouts of ADULT and the example, and running a protocol on them (shared by the hybrid tests)."""

from __future__ import annotations

from pathlib import Path

from datasets import ADULT_DIR, hierarchy_path
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.layout import Layout, parse_layout
from fedanon.model.config import AnonymizationConfig
from fedanon.protocols.kit.api import RunSettings
from fedanon.protocols.registry import protocol_spec
from fedanon.protocols.sim.equivalence import differences
from fedanon.protocols.sim.hybrid import centralized_joined, split_hybrid
from fedanon.protocols.sim.local_run import LocalRun, run_in_memory
from protocol_cases import MODELS, load

#: ADULT columns of the hybrid tests: three QIs at two clinics, the rest at registries.
ADULT_COLUMNS = ["sex", "age", "race", "marital-status", "education", "salary-class"]
ADULT_QIS = ["sex", "age", "race", "marital-status", "education"]

#: The bundled hybrid layouts of those columns (the benchmark `bench/hybrid.py` runs the same files):
#: 2+1 = two clinics + a registry holding every clinic patient; 2+2 = two clinics + a census
#: lacking every fourth person (dropped by the join) + a payroll office.
LAYOUT_FILES = {"2+1": ADULT_DIR / "layout-2-1.toml", "2+2": ADULT_DIR / "layout-2-2.toml"}

#: Run options per protocol: ElGamal counters keep C's runs short (Paillier is exercised by C's own tests).
OPTIONS = {"A": {}, "B": {}, "C": {"counters": "elgamal"}}

#: The example's quasi-identifiers (the small error cases run on the example).
EXAMPLE_QIS = ["age", "sex", "zipcode"]


def adult_layout(name: str) -> Layout:
    """A fresh copy of a bundled layout (tests may change its parties in place)."""
    return parse_layout(LAYOUT_FILES[name])


def adult_config(model: str, suppression: float, metric: str = "loss") -> AnonymizationConfig:
    """`model` of `protocol_cases.MODELS` on the ADULT QIs with salary-class sensitive; k = 5 for plain k."""
    config = MODELS[model](ADULT_QIS, "salary-class", suppression, metric)
    if model == "k":
        config.k = 5
    return config


def full_adult() -> tuple[list[str], list[list[str]], dict[str, Hierarchy], dict[str, Path]]:
    """All of the bundled ADULT in the order of ADULT_COLUMNS, its hierarchies and their files."""
    columns, rows, hierarchies = load("adult", ADULT_COLUMNS)
    index = [columns.index(c) for c in ADULT_COLUMNS]
    rows = [[r[i] for i in index] for r in rows]
    return list(ADULT_COLUMNS), rows, hierarchies, {a: hierarchy_path("adult", a) for a in ADULT_COLUMNS}


def example_case() -> tuple[list[str], list[list[str]], dict[str, Hierarchy], Layout]:
    """The 8-row example on the 2+1 layout: the clinics hold age and sex, the registry zipcode and diagnosis."""
    columns, rows, hierarchies = load("example", EXAMPLE_QIS)
    layout = adult_layout("2+1")
    for party in layout.parties:
        party.columns = {"registry": ["zipcode", "diagnosis"]}.get(party.name, ["age", "sex"])
    return columns, rows, hierarchies, layout


def example_k_config(metric: str = "loss") -> AnonymizationConfig:
    return MODELS["k"](EXAMPLE_QIS, "diagnosis", 0.0, metric)


def run_hybrid(protocol: str, layout: Layout, columns: list[str], rows: list[list[str]],
               hierarchies: dict[str, Hierarchy], config: AnonymizationConfig, *, record: bool = False,
               options: dict | None = None, local_edit=None, recipient: str | None = None) -> LocalRun:
    """Deal `rows` over the layout and run every role in this process (in-memory transport)."""
    shares = split_hybrid(columns, rows, layout)
    local = {p.name: s.local_data(hierarchies) for p, s in zip(layout.parties, shares)}
    if local_edit is not None:
        local_edit(local)
    parties = {name: "primary" for name in layout.names}
    if protocol_spec(protocol).needs_helper:
        parties["helper"] = "helper"
    settings = RunSettings(f"hybrid-{protocol}", protocol, "hybrid", config, parties, recipient or layout.names[0],
                           dict(options or {}))
    return run_in_memory(settings, local, record=record, timeout_s=300)


def hybrid_differences(layout: Layout, columns: list[str], rows: list[list[str]],
                       hierarchies: dict[str, Hierarchy], config: AnonymizationConfig,
                       transformation: dict | None, out_columns: list[str], out_rows: list[list[str]]) -> list[str]:
    """Differences from the engine on the joined plaintext table (empty: equivalent)."""
    central = centralized_joined(columns, rows, layout, hierarchies, config)
    return differences(central, transformation, out_columns, out_rows)


def run_equal_to_joined(protocol: str, layout: Layout, columns: list[str], rows: list[list[str]],
                        hierarchies: dict[str, Hierarchy], config: AnonymizationConfig, **kwargs) -> LocalRun:
    """`run_hybrid`, checked: no party failed and the recipient's result equals the engine on the joined table."""
    run = run_hybrid(protocol, layout, columns, rows, hierarchies, config, **kwargs)
    assert not run.errors, run.errors
    out = run.outcomes[kwargs.get("recipient") or layout.names[0]]
    assert hybrid_differences(layout, columns, rows, hierarchies, config, out.report.get("transformation"),
                              out.output_columns, out.output_rows) == []
    return run
