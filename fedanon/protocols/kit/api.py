"""What a protocol role receives and returns: the seam between protocols and parties.

The party daemon (fedanon.parties) builds a `RoleContext` from its own config and
the coordinator's run request, hands it to the role function registered for the
protocol, and ships the `RoleOutcome` back. Protocols never learn how messages
travel; parties never learn what a protocol does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping

from fedanon.engine.settings import EngineSettings
from fedanon.protocols.kit.transport import DEFAULT_TIMEOUT_S, Transport

if TYPE_CHECKING:  # engine types; imported lazily to keep this module light
    import numpy as np

    from fedanon.model.config import AnonymizationConfig
    from fedanon.data.hierarchy import Hierarchy
    from fedanon.data.table import EncodedTable
    from fedanon.engine.result import AnonymizationResult

Distribution = Literal["horizontal", "vertical", "hybrid"]
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

    def __post_init__(self) -> None:
        # Run settings only ever hold a validated config, so no role checks it again: the daemon
        # validated the one it received off the wire (a no-op here), an in-process run whose
        # caller built the config in Python has it validated now, once for all its parties.
        if self.config is not None:
            self.config.ensure_valid()

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
    # where this party's engine groups rows (its party config's [engine]); a role that runs the
    # search passes it to the engine, and no role ever sends it: it is this party's own compute
    engine: EngineSettings = field(default_factory=EngineSettings)

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
    # a primary of a DP run: which of its rows (in its own order) it sampled; its own
    # knowledge, kept here for in-process tests and never sent anywhere
    sample: "np.ndarray | None" = None


RoleFunction = Callable[[RoleContext], RoleOutcome]


@dataclass(frozen=True)
class FlagContext:
    """What turning a protocol's flag into run options may check against: the run's
    quasi-identifiers and their hierarchies (e.g. a pre-generalization level must exist)."""

    quasi_identifiers: list[str]
    hierarchies: Mapping[str, "Hierarchy"]


def _as_option(option: str) -> Callable[[Any, FlagContext], dict[str, Any]]:
    return lambda value, _ctx: {} if value is None else {option: value}


@dataclass(frozen=True)
class ClassMeansRoute:
    """How a protocol releases `mean` columns from encrypted class sums instead of raw values.

    Declared on the protocol's `ProtocolSpec`, so a command asks the registry whether the run's
    protocol and split have this route and names no protocol itself. `option` is the run option
    listing the columns; `encodable(text)` says whether the encoding carries a value; `limits`
    is the sentence a refusal quotes.
    """

    option: str
    splits: tuple[str, ...]
    encodable: Callable[[str], bool]
    limits: str


@dataclass(frozen=True)
class OptionFlag:
    """A command-line flag that sets one of a protocol's run options (`[options]` keys).

    Declared on the protocol's `ProtocolSpec`, so the commands add the flag, name the protocol
    in its help and refuse it for another protocol without naming any protocol themselves.
    `kind`: "value" (one value, `type`/`choices` apply), "switch" (present or not) or "repeat"
    (may be given several times; a list). `to_options(value, ctx)` turns the flag's value (None,
    False or [] when not given) into run options; it is called for every flag of the run's
    protocol, so it may also set an option's explicit default. By default it sets `option` to
    the value when one is given.
    """

    flag: str                      # e.g. "--cipher"
    option: str                    # the run option it sets, e.g. "cipher"
    help: str
    kind: Literal["value", "switch", "repeat"] = "value"
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    convert: Callable[[Any, FlagContext], dict[str, Any]] | None = None

    @property
    def dest(self) -> str:
        """The attribute name an argparse namespace holds the flag's value under."""
        return self.flag.lstrip("-").replace("-", "_")

    def given(self, value: Any) -> bool:
        return bool(value) if self.kind in ("switch", "repeat") else value is not None

    def to_options(self, value: Any, ctx: FlagContext) -> dict[str, Any]:
        return (self.convert or _as_option(self.option))(value, ctx)

