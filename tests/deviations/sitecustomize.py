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
    import fedanon.protocols.b.protocol as protocol_b
    from fedanon.data.table import EncodedTable
    from fedanon.protocols.kit import codec

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
    import fedanon.protocols.c.protocol as protocol_c
    from fedanon.protocols.kit import codec

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


def _rewrite_b_result(rewrite) -> None:
    """B's helper sends the recipient `rewrite(table, flags, report)` instead of its engine's output."""
    import fedanon.protocols.b.protocol as protocol_b
    from fedanon.protocols.kit import codec

    real = protocol_b.send_control

    def send_control(transport, to, topic, message, **parts):
        if topic == "b/result" and "table" in parts:
            table, flags = rewrite(codec.decode_table(parts["table"]), codec.decode_flags(parts["suppressed"]),
                                   message.report)
            parts["table"], parts["suppressed"] = codec.encode_table(table), codec.encode_flags(flags)
        return real(transport, to, topic, message, **parts)

    protocol_b.send_control = send_control


def _drop_b_rows() -> None:
    """B's helper leaves the last 10 rows out of the release."""
    from fedanon.data.table import EncodedTable

    _rewrite_b_result(lambda t, f, r: (EncodedTable(list(t.columns), t.codes[:-10], t.dictionaries), f[:-10]))


def _swap_b_rows() -> None:
    """B's helper replaces 10 rows by copies of 10 others: the count is right, the multiset is not."""
    from fedanon.data.table import EncodedTable

    def rewrite(t, f, r):
        codes = t.codes.copy()
        codes[:10] = codes[10:20]
        flags = f.copy()
        flags[:10] = flags[10:20]
        return EncodedTable(list(t.columns), codes, t.dictionaries), flags

    _rewrite_b_result(rewrite)


def _other_transformation_b() -> None:
    """B's helper reports (to the recipient and in every tally request) another level than it applied."""
    def rewrite(t, f, r):
        levels = r["transformation"]
        q = next((q for q in sorted(levels) if int(levels[q]) > 0), sorted(levels)[0])
        # a finer level than applied (a valid level, so nothing but the counting check objects);
        # the same dict goes into the tally requests: a consistent lie
        levels[q] = int(levels[q]) - 1 if int(levels[q]) > 0 else 1
        return t, f

    _rewrite_b_result(rewrite)


def _suppress_more_b() -> None:
    """B's helper suppresses a third of the rows (the engine's result, so every later message agrees)."""
    import dataclasses

    import fedanon.protocols.b.protocol as protocol_b
    from fedanon.data.table import EncodedTable

    real = protocol_b.anonymize

    def anonymize(table, hierarchies, config, **kwargs):
        result = real(table, hierarchies, config, **kwargs)
        out = result.output
        codes = out.codes.copy()
        dictionaries = [list(d) for d in out.dictionaries]
        hide = np.zeros(out.n_rows, dtype=bool)
        hide[::3] = True
        for q in config.quasi_identifiers:
            j = list(out.columns).index(q)
            if b"*" not in dictionaries[j]:
                dictionaries[j].append(b"*")
            codes[hide, j] = dictionaries[j].index(b"*")
        suppressed = np.asarray(result.suppressed, dtype=bool) | hide
        return dataclasses.replace(result, output=EncodedTable(list(out.columns), codes, dictionaries),
                                   suppressed=suppressed, suppressed_rows=int(suppressed.sum()))

    protocol_b.anonymize = anonymize


def _swap_counter_key_c() -> None:
    """C's helper hands the primaries its own counter key instead of the key holder's (so it could decrypt)."""
    import fedanon.protocols.c.protocol as protocol_c
    from fedanon.crypto.counters import generate_counter_key

    real = protocol_c.send_control
    own = generate_counter_key("elgamal")

    def send_control(transport, to, topic, message, **parts):
        if topic == "c/roster" and "counter_key" in parts:
            parts["counter_key"] = own.public_key.to_bytes()
        return real(transport, to, topic, message, **parts)

    protocol_c.send_control = send_control


def _swap_screen_key_c() -> None:
    """C's helper hands the primaries other than the key holder (p1) its own screening key, so it
    could read their rows' real/fake flags; the key holder, which would notice, gets its own."""
    import fedanon.protocols.c.protocol as protocol_c
    from fedanon.crypto.counters import generate_counter_key

    real = protocol_c.send_control
    own = generate_counter_key("elgamal")

    def send_control(transport, to, topic, message, **parts):
        if topic == "c/roster" and "screen_key" in parts and to != "p1":
            parts["screen_key"] = own.public_key.to_bytes()
        return real(transport, to, topic, message, **parts)

    protocol_c.send_control = send_control


def _duplicate_a_result() -> None:
    """A's master doubles every row of the engine's output before the decryption chain."""
    import dataclasses

    import fedanon.protocols.a.protocol as protocol_a
    from fedanon.data.table import EncodedTable

    real = protocol_a.anonymize

    def anonymize(table, hierarchies, config, **kwargs):
        result = real(table, hierarchies, config, **kwargs)
        out = result.output
        doubled = EncodedTable(list(out.columns), np.vstack([out.codes, out.codes]), out.dictionaries)
        return dataclasses.replace(result, output=doubled,
                                   suppressed=np.concatenate([result.suppressed, result.suppressed]))

    protocol_a.anonymize = anonymize


_DEVIATIONS = {"a-master-duplicates-rows": _duplicate_a_result, "b-helper-drops-rows": _drop_b_rows,
               "b-helper-swaps-rows": _swap_b_rows, "b-helper-reports-another-transformation": _other_transformation_b,
               "b-helper-suppresses-more": _suppress_more_b,
               "c-helper-swaps-counter-key": _swap_counter_key_c,
               "c-helper-swaps-screen-key": _swap_screen_key_c, "b-helper-duplicates-rows": _duplicate_b_result, "c-helper-counters-all-real": _all_counters_real_c}

if DEVIATION:
    _DEVIATIONS[DEVIATION]()
