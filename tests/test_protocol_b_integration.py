"""Helper-side integration on opaque values: append, hierarchy merge, TID join; share encoding."""

from __future__ import annotations

import numpy as np
import pytest

from fedanon.crypto.deterministic import DeterministicCipher, generate_key
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.errors import ProtocolError
from fedanon.protocols.kit.cellcrypt import decode_columns, encode_share, random_permutation, tid_tokens, token_keys
from fedanon.protocols.kit.integration import append_tables, check_tids, join_on_tid, merge_all_hierarchies


def test_append_merges_dictionaries_by_value() -> None:
    a = EncodedTable.from_rows(["x", "y"], [["1", "a"], ["2", "b"]])
    b = EncodedTable.from_rows(["x", "y"], [["2", "c"], ["3", "a"], ["1", "a"]])
    merged = append_tables([a, b])
    assert merged.decode_rows() == a.decode_rows() + b.decode_rows()
    assert sorted(merged.dictionaries[0]) == [b"1", b"2", b"3"]  # each value once


def test_hierarchy_merge_drops_duplicates_and_finds_conflicts() -> None:
    h1 = Hierarchy.from_rows("age", [["1", "a", "*"], ["2", "a", "*"]])
    h2 = Hierarchy.from_rows("age", [["2", "a", "*"], ["3", "b", "*"]])
    merged = merge_all_hierarchies({"age": [("p1", h1), ("p2", h2)]})
    assert not merged.conflicts
    assert sorted(r[0] for r in merged.hierarchies["age"].rows) == [b"1", b"2", b"3"]
    assert (merged.rules_received, merged.rules_kept) == (4, 3)
    # an upper-level conflict: 'b' generalizes to '*' at p1 but to '**' at p3
    h3 = Hierarchy.from_rows("age", [["4", "b", "**"]])
    bad = merge_all_hierarchies({"age": [("p1", h2), ("p3", h3)]})
    assert [(c.level, c.value, c.parties) for c in bad.conflicts] == [(1, b"b", ("p1", "p3"))]
    assert "age" not in bad.hierarchies


KEY = generate_key()


def _tokens(values: list[str], cipher: DeterministicCipher) -> np.ndarray:
    return token_keys(tid_tokens(cipher, values, KEY, b"ctx"), len(values), "test")


def test_join_on_tid_tokens_aligns_rows() -> None:
    cipher = DeterministicCipher(generate_key(), b"tid")
    tids = [str(i) for i in range(50)]
    age = {t: str(int(t) % 7) for t in tids}
    sex = {t: "m" if int(t) % 2 else "f" for t in tids}
    order1, order2 = random_permutation(50).tolist(), random_permutation(50).tolist()
    t1 = [tids[i] for i in order1]
    t2 = [tids[i] for i in order2]
    a = EncodedTable.from_rows(["age"], [[age[t]] for t in t1])
    b = EncodedTable.from_rows(["sex"], [[sex[t]] for t in t2])
    tokens = {"p1": _tokens(t1, cipher), "p2": _tokens(t2, cipher)}
    assert check_tids(tokens) is None
    joined, alignment = join_on_tid({"p1": a, "p2": b}, tokens)
    got = sorted(tuple(v.decode() for v in row) for row in joined.decode_rows())
    assert got == sorted((age[t], sex[t]) for t in tids)
    assert [t2[i] for i in alignment["p2"]] == [t1[i] for i in alignment["p1"]]


def test_check_tids_reports_missing_and_duplicates() -> None:
    cipher = DeterministicCipher(generate_key(), b"tid")
    tokens = {"p1": _tokens(["1", "2", "3"], cipher), "p2": _tokens(["1", "2", "4"], cipher),
              "p3": _tokens(["1", "1", "2", "3"], cipher)}
    mismatch = check_tids(tokens)
    assert mismatch is not None
    assert mismatch.missing_at == {"p1": 1, "p2": 1, "p3": 1}  # union {1, 2, 3, 4}
    assert mismatch.duplicates_at == {"p3": 1}
    assert mismatch.only_at["p2"] == [tid_tokens(cipher, ["4"], KEY, b"ctx")]
    with pytest.raises(ProtocolError, match="TID tokens"):
        token_keys(b"\x00" * 17, 1, "data of 'p1'")


def test_encode_share_is_a_relabelled_permutation() -> None:
    rows = [[str(i % 5), str(i % 3), "x"] for i in range(200)]
    perm = random_permutation(200)
    table = encode_share(["a", "b", "c"], rows, [0, 1, 2], perm)
    dicts = [[v.decode() for v in d] for d in table.dictionaries]
    assert decode_columns(table, dicts) == [rows[i] for i in perm.tolist()]
    # dictionary order is shuffled, not first-appearance order (which would leak row 0's value)
    orders = {tuple(encode_share(["a"], rows, [0], perm).dictionaries[0]) for _ in range(20)}
    assert len(orders) > 1


def test_tid_tokens_are_deterministic_injective_and_keyed() -> None:
    cipher = DeterministicCipher(KEY, b"ctx")
    values = ["1", "a\x00", "a", "", "x" * 15, "y" * 16, "ü" * 20, "1"]
    tokens = tid_tokens(cipher, values, KEY, b"ctx")
    chunks = [tokens[i * 16:(i + 1) * 16] for i in range(len(values))]
    assert chunks[0] == chunks[-1]  # deterministic
    assert len(set(chunks[:-1])) == len(values) - 1  # distinct TIDs, distinct tokens (also long ones)
    assert all(v.encode() not in tokens for v in values if len(v) > 2)
    other = tid_tokens(DeterministicCipher(generate_key(), b"ctx"), values, generate_key(), b"ctx")
    assert not set(chunks) & {other[i * 16:(i + 1) * 16] for i in range(len(values))}
    # same key, other run/column context: other tokens
    moved = tid_tokens(DeterministicCipher(KEY, b"ctx2"), values, KEY, b"ctx2")
    assert moved[:16] != tokens[:16] and moved[-16:] != tokens[-16:]
