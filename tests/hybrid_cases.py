"""Hybrid layouts of ADULT and the example, and running a protocol on them (shared by the hybrid tests)."""

from __future__ import annotations

from pathlib import Path

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.layout import Layout, parse_layout
from fedanon.model.config import AnonymizationConfig
from fedanon.protocols.kit.api import RunSettings
from fedanon.protocols.registry import protocol_spec
from fedanon.protocols.sim.equivalence import centralized, differences
from fedanon.protocols.sim.hybrid import joined_rows, split_hybrid
from fedanon.protocols.sim.local_run import LocalRun, run_in_memory

#: ADULT columns of the hybrid tests: three QIs at two clinics, the rest at registries.
ADULT_COLUMNS = ["sex", "age", "race", "marital-status", "education", "salary-class"]
ADULT_QIS = ["sex", "age", "race", "marital-status", "education"]

#: 2 row-parties + 1 column-party: every clinic patient is in the registry.
TWO_PLUS_ONE = """\
identifier = "pid"

[[party]]
name = "clinic1"
columns = ["sex", "age", "race"]
persons = "1/2"

[[party]]
name = "clinic2"
columns = ["sex", "age", "race"]
persons = "2/2"

[[party]]
name = "registry"
columns = ["marital-status", "education", "salary-class"]
persons = "all"
"""

#: 2 row-parties + 2 column-parties; the census registry lacks every fourth person (dropped).
TWO_PLUS_TWO = """\
identifier = "pid"

[[party]]
name = "clinic1"
columns = ["sex", "age", "race"]
persons = ["1/3", "3/3"]

[[party]]
name = "clinic2"
columns = ["sex", "age", "race"]
persons = "2/3"

[[party]]
name = "census"
columns = ["marital-status", "education"]
persons = ["1/4", "2/4", "3/4"]

[[party]]
name = "payroll"
columns = ["salary-class"]
persons = "all"
"""

LAYOUTS = {"2+1": TWO_PLUS_ONE, "2+2": TWO_PLUS_TWO}


def write_layout(folder: Path, name: str) -> Layout:
    path = folder / f"layout-{name.replace('+', '-')}.toml"
    path.write_text(LAYOUTS[name], encoding="utf-8")
    return parse_layout(path)


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
    central = centralized(columns, joined_rows(columns, rows, layout), hierarchies, config)
    return differences(central, transformation, out_columns, out_rows)
