"""Protocol C's command-line flags: the counter cipher and the share of pseudotuples.

Declared on the protocol so that `fedanon simulate` offers them from the registry spec; they
set the run options `counters` and `pseudotuples`, which every party checks when the run starts
(`counter_scheme`, `pseudotuple_share`).
"""

from __future__ import annotations

from fedanon.protocols.kit.api import OptionFlag

# the counter ciphers of protocol.py's COUNTER_SCHEMES (listed here so the registry, which reads
# these flags, does not load the protocol; tests/test_protocol_flags.py holds the two equal)
COUNTER_CHOICES = ("paillier", "elgamal")

FLAGS = (
    OptionFlag("--counters", "counters",
               "counter cipher, 'paillier' (default; 3072-bit, the dissertation's scheme) or 'elgamal' "
               "(exponential ElGamal on secp256k1, same security, much faster)", choices=COUNTER_CHOICES),
    OptionFlag("--pseudotuples", "pseudotuples",
               "pseudotuples per primary as a share of its real rows (default 0.25)", type=float,
               metavar="SHARE"),
)
