"""Protocol B's statistics mode: the helper adds the noise, and joins a vertical split's rows for a
table across several parties' columns (see `roles.py`, `joined.py`)."""

from fedanon.protocols.stats.roles import roles

ROLES = roles("helper", joins=True)
