"""Which protocols exist and what each needs: the one place the party and CLI layers ask.

A protocol plugs in with one `ProtocolSpec` in `_SPECS` and a module that defines
`ROLES: dict[str, RoleFunction]` (role name -> function of a `RoleContext`). The
daemon, the coordinator, `simulate`, `demo` and `run` read the spec -- whether the
run needs a helper party, whether it anonymizes (needs a privacy config and data),
its phases for the progress/report tables -- instead of testing protocol names.

How to add a protocol (e.g. C):
1. write `fedanon/protocols/protocol_x.py` on the shared role base
   (`fedanon.protocols.kit.roles`: phase timer, typed control messages, report
   assembly, `guarded` roles and `stop_run` for run-wide failure);
2. end it with `ROLES = {PRIMARY: ..., HELPER: ...}` (only the roles it has);
3. add a `ProtocolSpec` below, with the run options it reads and, for those a user sets on
   the command line, their `OptionFlag`s (see `protocols/a/flags.py`). Nothing else in
   parties/ or cli/ needs to change.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from fedanon.errors import ProtocolError
from fedanon.protocols.a.flags import FLAGS as A_FLAGS
from fedanon.protocols.c.class_means import ROUTE as C_MEANS
from fedanon.protocols.c.flags import FLAGS as C_FLAGS
from fedanon.protocols.kit.api import ClassMeansRoute, OptionFlag, RoleContext, RoleFunction, RoleOutcome

# The two kinds of party every protocol is built from: a primary holds data, a helper holds none
# (it computes on what the primaries send it). Protocols name their roles from these; the party
# and CLI layers use these names and never spell a role themselves.
PRIMARY = "primary"
HELPER = "helper"
PARTY_ROLES = (PRIMARY, HELPER)
# the protocol a command runs when none is named
DEFAULT_PROTOCOL = "B"
# the run option that turns a run into a statistics release (`protocols/stats/roles.py`)
STATISTICS_OPTION = "statistics"


@dataclass(frozen=True)
class ProtocolSpec:
    name: str
    module: str  # defines ROLES
    summary: str  # one line for help texts and the demo
    roles: tuple[str, ...]  # the roles a run of this protocol has
    needs_helper: bool  # exactly one party with role "helper" (False: the run must have none)
    anonymizes: bool  # needs a privacy config and the primaries' data; produces an anonymized table
    phases: tuple[str, ...]  # in order; every role reports seconds per phase under report["phases"]
    min_primaries: int = 1
    metrics: tuple[str, ...] | None = None  # the metrics it can optimize (None: every metric)
    options: tuple[str, ...] = ()  # run options (`[options]` keys) it reads besides the common ones
    flags: tuple[OptionFlag, ...] = ()  # command-line flags that set some of those options
    class_means: ClassMeansRoute | None = None  # releases mean columns from encrypted class sums
    # the splits in which it makes a (epsilon, delta)-DP release (`--dp`; protocols/dp/release.py)
    dp: tuple[str, ...] = ()
    dp_refusal: str = ""  # why it makes none where `dp` leaves a split out (one clause)
    # `fedanon demo` runs it on a seeded sample of this many rows of a larger data set (None: on
    # every row), so that the first command a user runs stays short where a protocol's search is slow
    demo_sample_rows: int | None = None
    # the module whose ROLES serve a run in the statistics mode (run option `statistics`: noisy
    # counts and marginals of the pooled table, `protocols/stats/`); None: no statistics mode
    statistics: str | None = None


_SPECS: dict[str, ProtocolSpec] = {
    "A": ProtocolSpec("A", "fedanon.protocols.a.protocol",
                      "commutative encryption around a ring of the data holders, no helper",
                      ("primary",), needs_helper=False, anonymizes=True, min_primaries=2,
                      phases=("encrypt", "integrate", "anonymize", "verify", "decrypt"),
                      options=("cipher", "min_levels", "verified"), flags=A_FLAGS,
                      dp=("horizontal", "vertical"), statistics="fedanon.protocols.stats.a"),
    "B": ProtocolSpec("B", "fedanon.protocols.b.protocol",
                      "shared deterministic AES keys, star around a non-colluding helper",
                      ("primary", "helper"), needs_helper=True, anonymizes=True,
                      phases=("encrypt", "integrate", "anonymize", "decrypt"),
                      dp=("horizontal", "vertical"), statistics="fedanon.protocols.stats.b"),
    "C": ProtocolSpec("C", "fedanon.protocols.c.protocol",
                      "B plus pseudotuples and encrypted row counters: the helper never learns a class size",
                      ("primary", "helper"), needs_helper=True, anonymizes=True,
                      phases=("encrypt", "integrate", "anonymize", "decrypt"),
                      # every metric; the entropy metrics show the key holder per-QI value counts
                      # (README threat model, Protocol C)
                      options=("counters", "pseudotuples", "aggregate_means"), flags=C_FLAGS,
                      class_means=C_MEANS, demo_sample_rows=2000, statistics="fedanon.protocols.stats.c",
                      # the key holder scores and draws (protocols/c/dp_release.py)
                      dp=("horizontal", "vertical")),
    "CHECK": ProtocolSpec("CHECK", "fedanon.protocols.kit.connectivity",
                          "connectivity check: nonce exchange over every channel, no data",
                          ("primary", "helper"), needs_helper=False, anonymizes=False,
                          phases=("check",)),
}


def protocol_spec(protocol: str) -> ProtocolSpec:
    spec = _SPECS.get(protocol.upper())
    if spec is None:
        known = ", ".join(sorted(_SPECS))
        raise ProtocolError(f"unknown protocol {protocol!r}; available: {known}")
    return spec


def known_protocol(protocol: str) -> ProtocolSpec | None:
    """The spec, or None for a name no protocol has (callers that defer the error)."""
    return _SPECS.get(protocol.upper())


def role_function(protocol: str, role: str) -> RoleFunction:
    """The role's function; for a protocol with a statistics mode, one that serves a run whose
    options ask for statistics (`STATISTICS_OPTION`) with that mode's role instead."""
    spec = protocol_spec(protocol)
    roles: dict[str, RoleFunction] = importlib.import_module(spec.module).ROLES
    try:
        anonymizing = roles[role]
    except KeyError:
        raise ProtocolError(f"protocol {spec.name} has no role {role!r}; roles: {', '.join(roles)}") from None
    if spec.statistics is None:
        return anonymizing
    counting: RoleFunction = importlib.import_module(spec.statistics).ROLES[role]

    def either(ctx: RoleContext) -> RoleOutcome:
        return (counting if STATISTICS_OPTION in ctx.settings.options else anonymizing)(ctx)

    return either


def statistics_refusal(protocol: str, distribution: str) -> str | None:
    """Why `protocol` has no statistics mode for a `distribution` split (None: it has)."""
    spec = protocol_spec(protocol)
    if spec.statistics is None:
        with_mode = " or ".join(n for n, s in sorted(_SPECS.items()) if s.statistics)
        return f"--stats-marginal: Protocol {spec.name} has no statistics mode; use Protocol {with_mode}"
    if distribution not in ("horizontal", "vertical"):
        return (f"--stats-marginal: the statistics mode counts a horizontal or a vertical split, not a "
                f"{distribution} one")
    return None


def statistics_joins(protocol: str) -> bool:
    """Whether `protocol`'s statistics mode counts a table across several parties' columns of a
    vertical split (on a join of their rows: the helper's, `protocols/stats/joined.py`, or without one
    round A's ring of primaries, `protocols/stats/ring.py`) instead of refusing it."""
    spec = protocol_spec(protocol)
    return spec.statistics is not None and bool(getattr(importlib.import_module(spec.statistics), "JOINS", False))


def dp_refusal(protocol: str, distribution: str) -> str | None:
    """Why `protocol` makes no DP release in a `distribution` split (None: it does)."""
    spec = protocol_spec(protocol)
    if distribution in spec.dp:
        return None
    where = f" in a {distribution} split" if spec.dp else ""
    return (f"--dp: Protocol {spec.name} makes no differentially private release{where}: "
            f"{spec.dp_refusal or 'not supported'}")


def available_protocols(anonymizing: bool = False) -> list[str]:
    """Protocol names; `anonymizing=True` leaves out diagnostics such as CHECK."""
    return sorted(name for name, spec in _SPECS.items() if spec.anonymizes or not anonymizing)


def option_flags() -> dict[str, tuple[OptionFlag, list[str]]]:
    """Every protocol's command-line flags: flag -> (its declaration, the protocols that read it).

    A flag two protocols declare must mean the same to both (one declaration, equal)."""
    out: dict[str, tuple[OptionFlag, list[str]]] = {}
    for name in sorted(_SPECS):
        for flag in _SPECS[name].flags:
            known = out.setdefault(flag.flag, (flag, []))
            if known[0] != flag:
                raise ProtocolError(f"flag {flag.flag} is declared differently by protocols {known[1]} and {name}")
            known[1].append(name)
    return out


def check_roles(protocol: str, roles: dict[str, str]) -> list[str]:
    """Problems with a run's party roles for this protocol (empty: fine); messages name parties."""
    spec = protocol_spec(protocol)
    problems = []
    for party, role in roles.items():
        if role not in spec.roles:
            problems.append(f"party {party!r} has role {role!r}, but protocol {spec.name} has only "
                            f"{' and '.join(repr(r) for r in spec.roles)} parties")
    helpers = [p for p, r in roles.items() if r == HELPER]
    if spec.needs_helper and len(helpers) != 1:
        problems.append(f"protocol {spec.name} needs exactly one helper party, the run names {len(helpers)}")
    primaries = sum(1 for r in roles.values() if r == PRIMARY)
    if spec.anonymizes and primaries < spec.min_primaries:
        problems.append(f"protocol {spec.name} needs at least {spec.min_primaries} primary (data-holding) "
                        f"part{'y' if spec.min_primaries == 1 else 'ies'}, the run names {primaries}")
    return problems
