"""Protocol C's statistics mode: every primary adds a share of the noise (see `roles.py`)."""

from fedanon.protocols.stats.roles import roles

ROLES = roles("joint")
