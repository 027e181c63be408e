"""What a protocol role receives and returns: the seam between protocols and parties.

The party daemon (fedanon.parties) builds a `RoleContext` from its own config and
the coordinator's run request, hands it to the role function registered for the
protocol, and ships the `RoleOutcome` back. Protocols never learn how messages
travel; parties never learn what a protocol does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal

from fedanon.protocols.kit.transport import DEFAULT_TIMEOUT_S, Transport

if TYPE_CHECKING:  # engine types; imported lazily to keep this module light
    import numpy as np

    from fedanon.model.config import AnonymizationConfig
    from fedanon.data.hierarchy import Hierarchy
    from fedanon.data.table import EncodedTable
    from fedanon.engine.result import AnonymizationResult

Distribution = Literal["horizontal", "vertical"]
Role = str  # "primary" or "helper"; a protocol's spec lists the roles it has


@dataclass
class LocalData:
    """One party's own plaintext share, after direct identifiers were removed.

    `rows` are the party's records as strings in `columns` order. In a vertical
    split `tid_column` names the shared tuple identifier. `hierarchies` holds the
    globally agreed hierarchies for the columns this party holds (QIs and, where
    a model needs one, sensitive attributes). `research_subset` marks the rows
    that belong to the research subset for delta-presence (None = no delta-presence).
    """

    columns: list[str]
    rows: list[list[str]]
    hierarchies: dict[str, "Hierarchy"]
    tid_column: str | None = None
    research_subset: "np.ndarray | None" = None


@dataclass
class RunSettings:
    """The coordinator's run request, identical at every party."""

    run_id: str
    protocol: str  # "A", "B" or "C"
    distribution: Distribution
    config: "AnonymizationConfig"
    parties: dict[str, Role]  # party name -> role, in a fixed order
    result_recipient: str  # the primary that ends up with the decrypted output
    options: dict[str, Any] = field(default_factory=dict)
    # How long one `receive` may wait (the run's limits: a Pohlig-Hellman pass can take minutes).
    receive_timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def primaries(self) -> list[str]:
        return [name for name, role in self.parties.items() if role == "primary"]

    @property
    def helpers(self) -> list[str]:
        return [name for name, role in self.parties.items() if role == "helper"]


@dataclass
class RoleContext:
    me: str
    transport: Transport
    settings: RunSettings
    local: LocalData | None  # None for a helper, which holds no data

    def __post_init__(self) -> None:
        # Every receive of this role waits as long as the run's limits allow.
        self.transport.receive_timeout_s = self.settings.receive_timeout_s


class HoldsOutput:
    """Row-wise views of an `output` table for callers that read a result row by row, such as
    tests comparing row multisets. The way from the protocol to the output file never uses them,
    so the result stays a table there."""

    output: "EncodedTable | None"

    @property
    def output_columns(self) -> list[str] | None:
        return None if self.output is None else list(self.output.columns)

    @property
    def output_rows(self) -> list[list[str]] | None:
        return None if self.output is None else self.output.text_rows()


@dataclass
class RoleOutcome(HoldsOutput):
    """What one role produced: the decrypted output at the recipient, a report everywhere.

    `output` is the anonymized table in plaintext, set only at a party that legitimately
    learns the result: the engine's codes (permuted rows) with decrypted dictionaries of
    UTF-8 values (a suppressed cell is "*"). It stays in this form on its way to the
    coordinator and into the output file. `report` holds per-phase timings (seconds) and
    anything the role wants to tell the coordinator; the transport's byte counts are added
    by the caller.
    """

    output: "EncodedTable | None" = None
    result: "AnonymizationResult | None" = None
    report: dict[str, Any] = field(default_factory=dict)


RoleFunction = Callable[[RoleContext], RoleOutcome]
