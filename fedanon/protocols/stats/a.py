"""Protocol A's statistics mode: no helper, so the primary after the key holder (A's master) adds
the encrypted counts, and every primary adds a share of the noise (see `roles.py`)."""

from fedanon.protocols.stats.roles import roles

ROLES = {"primary": roles("joint")["primary"]}
