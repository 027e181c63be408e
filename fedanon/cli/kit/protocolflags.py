"""The command-line flags of the protocols' run options, read from the protocol registry.

Each protocol declares its flags on its `ProtocolSpec` (`OptionFlag`); this module adds them to a
command's parser, one argument group per protocol, and turns the given flags into the run's
options, refusing a flag the chosen protocol does not read. Commands therefore name no protocol.
"""

from __future__ import annotations

import argparse
from typing import Any, Mapping

from fedanon.errors import InputError
from fedanon.protocols.kit.api import FlagContext
from fedanon.protocols.registry import available_protocols, option_flags, protocol_spec


def add_protocol_flags(parser: argparse.ArgumentParser) -> None:
    """One group per protocol that has flags, titled from its spec; a shared flag is added once."""
    added: set[str] = set()
    for name in available_protocols(anonymizing=True):
        spec = protocol_spec(name)
        fresh = [f for f in spec.flags if f.flag not in added]
        if not fresh:
            continue
        group = parser.add_argument_group(f"Protocol {spec.name} ({spec.summary})")
        for flag in fresh:
            added.add(flag.flag)
            kwargs: dict[str, Any] = {"dest": flag.dest, "help": flag.help}
            if flag.kind == "switch":
                kwargs["action"] = "store_true"
            elif flag.kind == "repeat":
                kwargs.update(action="append", default=[])
            else:
                kwargs["default"] = None
            if flag.type is not None:
                kwargs["type"] = flag.type
            if flag.choices is not None:
                kwargs["choices"] = list(flag.choices)
            if flag.metavar is not None:
                kwargs["metavar"] = flag.metavar
            group.add_argument(flag.flag, **kwargs)


def protocol_flag_options(args: argparse.Namespace, protocol: str, quasi_identifiers: list[str],
                          hierarchies: Mapping[str, Any]) -> dict[str, Any]:
    """The run options the protocol's flags set; InputError (one line) for a flag given that the
    protocol does not read."""
    spec = protocol_spec(protocol)
    own = {f.flag for f in spec.flags}
    for name, (flag, readers) in option_flags().items():
        if name not in own and flag.given(getattr(args, flag.dest, None)):
            names = " or ".join(readers)
            raise InputError(f"{name} applies only to --protocol {names} (an option of Protocol {names}, "
                             f"not of Protocol {spec.name})")
    ctx = FlagContext(list(quasi_identifiers), hierarchies)
    options: dict[str, Any] = {}
    for flag in spec.flags:
        options.update(flag.to_options(getattr(args, flag.dest, None), ctx))
    return options
