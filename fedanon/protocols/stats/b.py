"""Protocol B's statistics mode: the helper adds the noise (see `roles.py`)."""

from fedanon.protocols.stats.roles import roles

ROLES = roles("helper")
