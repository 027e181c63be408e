"""Protocol C's statistics mode: every primary adds a share of the noise, and the helper joins a
vertical split's rows for a table across several parties' columns, summing encrypted counters
(see `roles.py`, `joined.py`)."""

from fedanon.protocols.stats.roles import roles

#: a table across several parties' columns is counted on the helper's join (`registry.statistics_joins`)
JOINS = True

ROLES = roles("joint", joins=JOINS)
