"""What the protocol tests share: bundled data, the model matrix, in-memory runs, the equivalence check.

Protocols A, B and C are held to the same central property (docs/design.md): for every split,
party count, privacy model and suppression limit, the result recipient's decrypted table
equals the engine's result on the pooled plaintext -- same transformation, same row
multiset -- and when the pooled data has no solution every party stops with
NoSolutionError. The per-protocol test modules add what only their protocol promises
(A: the master's report; B: the helper's; C: pseudotuples dropped). Roles come from the
protocol registry, so a protocol with a helper gets one here without a special case.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from fedanon.model.config import AnonymizationConfig
from fedanon.model.privacy.presence import DeltaPresence
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.data.io.delimited import read_table_csv
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.result import NoSolutionError
from fedanon.errors import ProtocolError
from fedanon.protocols.kit.api import LocalData, RunSettings
from fedanon.protocols.sim.equivalence import Central, centralized, differences
from fedanon.protocols.sim.local_run import LocalRun, run_in_memory
from fedanon.protocols.registry import known_protocol
from fedanon.protocols.sim.split import split_horizontal, split_vertical

from datasets import DATA_DIR as DATA
EX_QIS = ["age", "sex", "zipcode"]
EX_ATTRS = EX_QIS + ["diagnosis"]

Table = tuple[list[str], list[list[str]], dict[str, Hierarchy]]


def load(name: str, attrs: list[str]) -> Table:
    """A bundled dataset's columns, rows and the hierarchies of `attrs`."""
    columns, rows = read_table_csv(DATA / name / f"{name}.csv")
    return columns, rows, {a: Hierarchy.read_csv(DATA / name / f"{name}_hierarchy_{a}.csv", a) for a in attrs}


def sample_adult(attrs: list[str], size: int, seed: int, keep_all_columns: bool = False) -> Table:
    """`size` ADULT rows drawn without replacement (seeded), in file order; only `attrs` unless told."""
    columns, rows, hierarchies = load("adult", attrs)
    pick = sorted(np.random.default_rng(seed).choice(len(rows), size=size, replace=False).tolist())
    if keep_all_columns:
        return columns, [rows[i] for i in pick], hierarchies
    index = [columns.index(c) for c in attrs]
    return list(attrs), [[rows[i][j] for j in index] for i in pick], hierarchies


#: The privacy-model matrix every protocol is run through: (qis, sensitive, suppression, metric) -> config.
MODELS = {
    "k": lambda qis, s, supp, metric: AnonymizationConfig(qis, k=2, suppression=supp, metric=metric),
    "recursive-l": lambda qis, s, supp, metric: AnonymizationConfig(
        qis, k=1, l_diversity=LDiversity("recursive", 2, s, c=4), suppression=supp, metric=metric),
    "t-equal": lambda qis, s, supp, metric: AnonymizationConfig(
        qis, t_closeness=TCloseness(0.3, "equal", s), suppression=supp, metric=metric),
    "t-hierarchical": lambda qis, s, supp, metric: AnonymizationConfig(
        qis, t_closeness=TCloseness(0.2, "hierarchical", s), suppression=supp, metric=metric),
    "delta": lambda qis, s, supp, metric: AnonymizationConfig(
        qis, k=2, delta_presence=DeltaPresence(0.0, 0.6), suppression=supp, metric=metric),
}


def research_subset(n_rows: int) -> np.ndarray:
    """Every third row: the δ-presence research subset of the matrix."""
    return np.array([i % 3 == 0 for i in range(n_rows)])


def example_hierarchies() -> dict[str, Hierarchy]:
    return {a: Hierarchy.read_csv(DATA / "example" / f"example_hierarchy_{a}.csv", a) for a in EX_ATTRS}


def example_row_strategy(hierarchies: dict[str, Hierarchy]) -> st.SearchStrategy[list[str]]:
    """Rows drawn from the example's value domains, so the bundled hierarchies cover them."""
    domains = {a: [r[0].decode() for r in h.rows] for a, h in hierarchies.items()}
    return st.tuples(*(st.sampled_from(domains[a]) for a in EX_ATTRS)).map(list)


def roles_for(protocol: str, n: int) -> dict[str, str]:
    """p1..pn as primaries, plus a helper where the protocol's registry spec asks for one."""
    roles = {f"p{i + 1}": "primary" for i in range(n)}
    spec = known_protocol(protocol)
    if spec is not None and spec.needs_helper:
        roles["helper"] = "helper"
    return roles


def settings_for(protocol: str, distribution: str, n: int, config: AnonymizationConfig,
                 options: dict | None = None, recipient: str = "p1") -> RunSettings:
    return RunSettings(f"test-{protocol.lower()}-{distribution}-{n}", protocol, distribution, config,
                       roles_for(protocol, n), recipient, options or {})


def shares_for(table: Table, distribution: str, n: int, subset: np.ndarray | None = None) -> dict[str, LocalData]:
    columns, rows, hierarchies = table
    split = split_horizontal if distribution == "horizontal" else split_vertical
    return {f"p{i + 1}": s.local_data(hierarchies)
            for i, s in enumerate(split(columns, rows, n, research_subset=subset))}


def run_protocol(protocol: str, table: Table, config: AnonymizationConfig, distribution: str, n: int,
                 subset: np.ndarray | None = None, options: dict | None = None, recipient: str = "p1",
                 record: bool = False, timeout_s: float = 180) -> tuple[LocalRun, dict[str, LocalData]]:
    local = shares_for(table, distribution, n, subset)
    run = run_in_memory(settings_for(protocol, distribution, n, config, options, recipient), local,
                        record=record, timeout_s=timeout_s)
    return run, local


def check_equivalent(protocol: str, table: Table, config: AnonymizationConfig, distribution: str, n: int,
                     subset: np.ndarray | None = None, options: dict | None = None, recipient: str = "p1",
                     timeout_s: float = 180) -> tuple[LocalRun, Central | None]:
    """Run the protocol and assert the common property; (run, centralized or None) for protocol-specific checks."""
    columns, rows, hierarchies = table
    try:
        central: Central | None = centralized(columns, rows, hierarchies, config, subset)
    except NoSolutionError:
        central = None
    run, _ = run_protocol(protocol, table, config, distribution, n, subset, options, recipient, timeout_s=timeout_s)
    everyone = list(roles_for(protocol, n))
    if central is None:
        assert sorted(run.errors) == sorted(everyone), run.errors
        assert all(isinstance(e, NoSolutionError) for e in run.errors.values()), run.errors
        return run, None
    assert not run.errors, run.errors
    out = run.outcomes[recipient]
    released = len(rows) if subset is None else int(np.sum(subset))
    assert out.output_rows is not None and len(out.output_rows) == released
    assert differences(central, out.report["transformation"], out.output_columns, out.output_rows) == []
    # everyone else learns the outcome's metadata, but no rows
    assert all(run.outcomes[p].output_rows is None for p in everyone if p != recipient)
    return run, central


def assert_all_fail(run: LocalRun, protocol: str, n: int, pattern: str, kind: type = ProtocolError) -> None:
    """Every party of the run stopped with `kind`, and each one's message contains `pattern`."""
    everyone = list(roles_for(protocol, n))
    assert sorted(run.errors) == sorted(everyone), f"outcomes without error: {set(everyone) - set(run.errors)}"
    for party, exc in run.errors.items():
        assert isinstance(exc, kind), (party, exc)
        assert pattern in str(exc), (party, str(exc))


__all__: list[Any] = [
    "DATA", "EX_QIS", "EX_ATTRS", "MODELS", "Table", "sample_adult", "assert_all_fail", "check_equivalent",
    "example_hierarchies", "example_row_strategy", "load", "research_subset", "roles_for", "run_protocol",
    "settings_for", "shares_for",
]
