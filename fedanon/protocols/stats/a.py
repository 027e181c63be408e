"""Protocol A's statistics mode: no helper, so the primary after the key holder (A's master) adds
the encrypted counts, and every primary adds a share of the noise; a table across several parties' columns
of a vertical split is joined round the ring of primaries under commutative encryption (see `roles.py`,
`ring.py`)."""

from fedanon.protocols.stats.roles import roles

#: a table across several parties' columns is counted on the join round the ring of primaries (`ring.py`)
JOINS = True

ROLES = {"primary": roles("joint", joins=JOINS)["primary"]}
