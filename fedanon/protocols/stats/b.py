"""Protocol B's statistics mode: the helper adds the noise, and joins a vertical split's rows for a
table across several parties' columns (see `roles.py`, `joined.py`)."""

from fedanon.protocols.stats.roles import roles

#: a table across several parties' columns is counted on the helper's join (`registry.statistics_joins`)
JOINS = True

ROLES = roles("helper", joins=JOINS)
