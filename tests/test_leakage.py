"""What parties other than a value's owner, and the helper, ever receive in Protocol B.

Every payload every party receives is recorded (in-memory transport), unpacked as far
as our own wire format allows (message parts, Snappy blocks) and scanned for planted
canary values that only one party holds. They may appear only in what the result
recipient decrypts locally. The helper must hold no key that decrypts a cell: no
column key occurs in anything it receives, no 64-byte window of anything it receives
works as an AES-SIV key, and the sealed key bundles it relays do not open for it.
"""

from __future__ import annotations


import pytest
import snappy

from fedanon.crypto.deterministic import DeterministicCipher
from fedanon.crypto.errors import DecryptionError
from fedanon.crypto.keyagreement import KeyAgreementIdentity
from fedanon.model.config import AnonymizationConfig
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.data.io.delimited import read_table_csv
from fedanon.data.hierarchy import Hierarchy
from fedanon.errors import FedanonError
from fedanon.protocols.kit import codec
from fedanon.protocols.b import protocol as protocol_b
from fedanon.protocols.kit.api import RunSettings
from fedanon.protocols.kit.cellcrypt import cipher_context
from fedanon.protocols.sim.local_run import run_in_memory
from fedanon.protocols.sim.split import split_horizontal, split_vertical

from datasets import EXAMPLE_DIR as DATA
QIS = ["age", "sex", "zipcode"]
CANARY_AGE = "CANARY-AGE-7f3a9c"
CANARY_DIAG = "CANARY-DIAGNOSIS-51be02"


def views(payload: bytes, depth: int = 0) -> list[bytes]:
    """The payload itself plus every decodable layer inside it (message parts, Snappy)."""
    out = [payload]
    if depth > 4:
        return out
    try:
        parts = codec.unpack_message(payload)
    except FedanonError:
        parts = {}
    for part in parts.values():
        out.extend(views(part, depth + 1))
    try:
        inner = snappy.uncompress(payload)
    except Exception:
        inner = None
    if inner is not None and inner != payload:
        out.extend(views(inner, depth + 1))
    return out


def test_scanner_finds_plaintext_hidden_in_our_wire_format() -> None:
    """Positive control: a plaintext cell inside a compressed table inside a message is found."""
    from fedanon.data.table import EncodedTable
    table = EncodedTable.from_rows(["a"], [[CANARY_AGE]] + [["x"]] * 100)
    blob = codec.pack_message({"table": codec.encode_table(table)})
    assert any(CANARY_AGE.encode() in v for v in views(blob))


def _planted(distribution: str):
    columns, rows = read_table_csv(DATA / "example.csv")
    hierarchies = {a: Hierarchy.read_csv(DATA / f"example_hierarchy_{a}.csv", a) for a in QIS}
    age_rows = [[v.decode() for v in r] for r in hierarchies["age"].rows] + [[CANARY_AGE, "61-99", "*"]]
    split = split_horizontal if distribution == "horizontal" else split_vertical
    shares = split(columns, rows, 3)
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(shares)}
    # the canary owner: p2 horizontally; vertically p1, which is dealt both age and diagnosis
    owner = "p2" if distribution == "horizontal" else "p1"
    assert {"age", "diagnosis"} <= set(local[owner].columns)
    data = local[owner]
    ia, idg = data.columns.index("age"), data.columns.index("diagnosis")
    data.rows[0][ia] = CANARY_AGE
    data.rows[0][idg] = CANARY_DIAG
    data.hierarchies = dict(data.hierarchies, age=Hierarchy.from_rows("age", age_rows))
    if distribution == "horizontal":
        # everybody uses the same global hierarchy, so the canary's rule is no conflict
        for d in local.values():
            d.hierarchies = dict(d.hierarchies, age=data.hierarchies["age"])
    return local, owner


@pytest.mark.parametrize("distribution", ["horizontal", "vertical"])
def test_canaries_never_leave_their_owner_except_in_the_decrypted_result(distribution: str, monkeypatch) -> None:
    keys: list[bytes] = []
    real_generate = protocol_b.generate_key

    def spy() -> bytes:
        key = real_generate()
        keys.append(key)
        return key

    monkeypatch.setattr(protocol_b, "generate_key", spy)
    local, owner = _planted(distribution)
    recipient = "p3" if owner != "p3" else "p2"
    # 1-diverse on diagnosis keeps the diagnosis column (and so the canary) in the output
    config = AnonymizationConfig(QIS, k=1, l_diversity=LDiversity("distinct", 1, "diagnosis"))
    parties = {"p1": "primary", "p2": "primary", "p3": "primary", "helper": "helper"}
    settings = RunSettings("leak-run", "B", distribution, config, parties, recipient, {})
    run = run_in_memory(settings, local, record=True, timeout_s=60)
    assert not run.errors, run.errors

    canaries = [CANARY_AGE.encode(), CANARY_DIAG.encode()]
    for party, transport in run.transports.items():
        if party == owner:
            continue
        assert transport.recorded, f"nothing recorded at {party}"
        for sender, topic, payload in transport.recorded:
            for view in views(payload):
                for canary in canaries:
                    assert canary not in view, f"{canary!r} reached {party} from {sender} in {topic}"
    # ... yet the recipient's decrypted output does contain the owner's value
    output = run.outcomes[recipient].output_rows
    assert any(CANARY_DIAG in row for row in output)

    # the helper received no column key, in any layer of any payload
    assert keys
    helper_views = [v for _, _, p in run.transports["helper"].recorded for v in views(p)]
    for key in keys:
        assert all(key not in v for v in helper_views)

    # no 64-byte window of anything the helper received decrypts a cell
    data_msg = next(p for s, t, p in run.transports["helper"].recorded if t == "b/data" and s == owner)
    table = codec.decode_table(codec.unpack_message(data_msg)["table"])
    column = "diagnosis"
    cell = table.dictionaries[table.columns.index(column)][0]
    context = cipher_context("leak-run", column)
    tried = 0
    for view in helper_views:
        for start in range(0, max(0, len(view) - 63)):
            window = view[start:start + 64]
            tried += 1
            with pytest.raises(DecryptionError):
                DeterministicCipher(window, context).decrypt(cell)
    assert tried > 1000

    # the sealed key bundles the helper relayed do not open with any identity it could make
    leader_public = None
    for sender, topic, payload in run.transports["helper"].recorded:
        if sender == "p1" and topic == "b/hello":
            import json
            leader_public = bytes.fromhex(json.loads(codec.unpack_message(payload)["control"])["public_key"])
    relayed = [(t, p) for s, t, p in run.transports["helper"].recorded if t.startswith("b/keys-for/")]
    assert len(relayed) == 2 and leader_public is not None
    for topic, sealed in relayed:
        recipient_name = topic.rsplit("/", 1)[1]
        for name in (recipient_name, "helper", ""):
            intruder = KeyAgreementIdentity.generate(name)
            with pytest.raises(DecryptionError):
                intruder.open("p1", leader_public, sealed, b"fedanon/B/v1/column-keys/leak-run")
