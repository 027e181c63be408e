"""Protocol name -> role name -> role function. The daemon looks roles up here."""

from __future__ import annotations

import importlib

from fedanon.errors import ProtocolError
from fedanon.protocols.api import RoleFunction

# Modules that define `ROLES: dict[str, RoleFunction]`; imported on first use.
_PROTOCOL_MODULES: dict[str, str] = {
    "B": "fedanon.protocols.protocol_b",
    "CHECK": "fedanon.protocols.connectivity",
}


def role_function(protocol: str, role: str) -> RoleFunction:
    module_name = _PROTOCOL_MODULES.get(protocol.upper())
    if module_name is None:
        known = ", ".join(sorted(_PROTOCOL_MODULES))
        raise ProtocolError(f"unknown protocol {protocol!r}; available: {known}")
    roles: dict[str, RoleFunction] = importlib.import_module(module_name).ROLES
    try:
        return roles[role]
    except KeyError:
        raise ProtocolError(f"protocol {protocol} has no role {role!r}; roles: {', '.join(roles)}") from None


def available_protocols() -> list[str]:
    return sorted(_PROTOCOL_MODULES)
