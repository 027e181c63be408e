"""What parties receive in a hybrid run (A, B, C): no cell value, identifier, path or key of another.

Every payload every party receives is recorded (in-memory transport) and unpacked as far as
our wire format allows (`test_leakage.views`). Canary values sit in one cell of one row-party
(age) and one column-party (diagnosis), and every identifier is a canary pseudonym: none of
them may reach anyone but their holder, except the cells in the result the recipient decrypts.
The identifiers never appear in the result at all, and B's and C's helper holds no column key
(A has no helper; its commutative keys never leave their party, see `test_protocol_a.py`).
"""

from __future__ import annotations

from pathlib import Path

from fedanon.data.hierarchy import Hierarchy
from fedanon.model.config import AnonymizationConfig
from fedanon.model.privacy.ldiversity import LDiversity
import pytest

from fedanon.protocols.b import protocol as protocol_b
from fedanon.protocols.c import protocol as protocol_c
from hybrid_cases import OPTIONS, example_case, run_hybrid
from test_leakage import views

CANARY_AGE = "CANARY-AGE-29d1e4"
CANARY_DIAG = "CANARY-DIAGNOSIS-c07a55"
PSEUDONYM = "PSEUDONYM-b81f-"


def _plant(local) -> None:
    """clinic2's first age and the registry's first diagnosis become canaries; pseudonyms as identifiers."""
    clinic2, registry = local["clinic2"], local["registry"]
    for data in local.values():
        for row in data.rows:
            row[0] = PSEUDONYM + row[0]
    age_rows = [[v.decode() for v in r] for r in clinic2.hierarchies["age"].rows] + [[CANARY_AGE, "61-99", "*"]]
    for name in ("clinic1", "clinic2"):  # one agreed hierarchy: the canary's rule is no conflict
        local[name].hierarchies = dict(local[name].hierarchies, age=Hierarchy.from_rows("age", age_rows))
    clinic2.rows[0][clinic2.columns.index("age")] = CANARY_AGE
    registry.rows[0][registry.columns.index("diagnosis")] = CANARY_DIAG


@pytest.mark.parametrize("protocol", ["A", "B", "C"])
def test_hybrid_run_sends_no_cell_identifier_path_or_key(tmp_path: Path, monkeypatch, protocol: str) -> None:
    keys: list[bytes] = []
    module = {"B": protocol_b, "C": protocol_c}.get(protocol)
    if module is not None:
        real_generate = module.generate_key

        def spy() -> bytes:
            key = real_generate()
            keys.append(key)
            return key

        monkeypatch.setattr(module, "generate_key", spy)
    columns, rows, hierarchies, layout = example_case()
    # distinct-1-diversity on diagnosis keeps the diagnosis column (and its canary) in the output
    config = AnonymizationConfig(["age", "sex", "zipcode"], k=1, l_diversity=LDiversity("distinct", 1, "diagnosis"))
    run = run_hybrid(protocol, layout, columns, rows, hierarchies, config, record=True, local_edit=_plant,
                     options=OPTIONS[protocol])
    assert not run.errors, run.errors

    owners = {CANARY_AGE.encode(): "clinic2", CANARY_DIAG.encode(): "registry"}
    output = run.outcomes["clinic1"].output_rows
    # the recipient may receive the released cells (A's owners decode them for it), nothing else
    released = {cell.encode() for row in output for cell in row}
    forbidden = [PSEUDONYM.encode(), str(tmp_path).encode(), str(layout.path).encode()]
    for party, transport in run.transports.items():
        assert transport.recorded, f"nothing recorded at {party}"
        for sender, topic, payload in transport.recorded:
            for view in views(payload):
                for canary, owner in owners.items():
                    allowed = party == owner or (party == "clinic1" and canary in released)
                    assert allowed or canary not in view, f"{canary!r} reached {party} from {sender} in {topic}"
                for text in forbidden:
                    assert text not in view, f"{text!r} reached {party} from {sender} in {topic}"
    # ... and the recipient (clinic1) did decrypt the other parties' cells of the joined rows
    assert any(CANARY_DIAG in row for row in output)
    assert not any(PSEUDONYM in cell for row in output for cell in row)  # the identifier is never released
    if protocol == "A":
        return
    # the helper received no column key (nor the identifier's), in any layer of any payload
    assert keys
    helper_views = [v for _, _, p in run.transports["helper"].recorded for v in views(p)]
    for key in keys:
        assert all(key not in v for v in helper_views)
    assert len(keys) == 1 + 4  # the leader drew the identifier's key and one per column, nothing else
