"""Makes a party daemon deviate from its protocol: loaded only by the deviation tests.

The tests start real daemons (`python -m fedanon party serve`) with this folder first on
PYTHONPATH and `FEDANON_TEST_DEVIATION` naming one deviation; Python imports
`sitecustomize` at start-up, so the daemon runs the unchanged protocol code with one
message rewritten as a deviating party would. Each deviation changes what its role sends
and keeps every other message honest (the strongest form of the attack: the rest of the
run looks normal). Nothing here is imported by `fedanon`.
"""

from __future__ import annotations

import os

import numpy as np

DEVIATION = os.environ.get("FEDANON_TEST_DEVIATION", "")


def _duplicate_b_result() -> None:
    """B's helper releases every row of the engine's output twice."""
    import fedanon.protocols.protocol_b as protocol_b
    from fedanon.engine.table import EncodedTable
    from fedanon.protocols import codec

    real = protocol_b.send_control

    def send_control(transport, to, topic, message, **parts):
        if topic == "b/result" and "table" in parts:
            table = codec.decode_table(parts["table"])
            doubled = EncodedTable(list(table.columns), np.vstack([table.codes, table.codes]), table.dictionaries)
            parts["table"] = codec.encode_table(doubled)
            if "suppressed" in parts:
                flags = codec.decode_flags(parts["suppressed"])
                parts["suppressed"] = codec.encode_flags(np.concatenate([flags, flags]))
            message.report["rows_released"] = doubled.n_rows
        return real(transport, to, topic, message, **parts)

    protocol_b.send_control = send_control


def _all_counters_real_c() -> None:
    """C's helper re-encrypts every row counter of its result as Enc(1): pseudotuples become 'real'."""
    import fedanon.protocols.protocol_c as protocol_c
    from fedanon.protocols import codec

    keys: list = []
    real_key = protocol_c.counter_public_key_from_bytes
    real_send = protocol_c.send_control

    def counter_public_key_from_bytes(blob):
        key = real_key(blob)
        keys.append(key)
        return key

    def send_control(transport, to, topic, message, **parts):
        if topic == "c/result" and keys:
            key = keys[-1]
            n = codec.decode_table(parts["table"]).n_rows
            ones = key.load(key.encrypt_counters([True] * n))
            parts["counters/real"] = key.sums_message(ones, [3] * n, list(range(n)))
            key.unload(ones)
        return real_send(transport, to, topic, message, **parts)

    protocol_c.counter_public_key_from_bytes = counter_public_key_from_bytes
    protocol_c.send_control = send_control


_DEVIATIONS = {"b-helper-duplicates-rows": _duplicate_b_result, "c-helper-counters-all-real": _all_counters_real_c}

if DEVIATION:
    _DEVIATIONS[DEVIATION]()
