"""Primaries holding horizontal shares of a table, for tests over real party daemons (not a test module)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from fedanon.parties.simulation import SimulatedParty

from datasets import EXAMPLE_DIR as EXAMPLE
EXAMPLE_QIS = ("age", "sex", "zipcode")


def example_primaries(folder: Path, source: Path = EXAMPLE / "example.csv", names: Sequence[str] = ("p1", "p2"),
                      sensitive: dict[str, Path | None] | None = None,
                      insensitive: Sequence[str] = ()) -> list[SimulatedParty]:
    """Deal `source`'s rows round-robin over `names`, each a primary with the example's QI hierarchies."""
    lines = Path(source).read_text().splitlines()
    parties = []
    for i, name in enumerate(names):
        share = Path(folder) / f"{name}.csv"
        share.write_text("\n".join([lines[0], *lines[1 + i::len(names)]]) + "\n")
        parties.append(SimulatedParty(name, "primary", csv_path=share,
                                      qi_hierarchies={q: EXAMPLE / f"example_hierarchy_{q}.csv" for q in EXAMPLE_QIS},
                                      sensitive=dict(sensitive or {}), insensitive=list(insensitive)))
    return parties
