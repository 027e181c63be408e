"""A release check that counts: the result is the primaries' real rows, each exactly once.

Why: the recipient's other checks (`resultcheck.py`) judge the decrypted release and look
for its own rows in it, but presence is not a multiset test. A helper that duplicates
every row doubles every class and passes them; in Protocol C a helper holds the counter
public key and can re-encrypt every row counter as Enc(1), so the pseudotuples come back
as "real" rows that pad the classes. Neither changes anything the recipient could tell
from its own rows.

The check: every primary announces to the checking party (B's recipient, C's key holder)
*directly* -- over its own authenticated channel, never through the helper -- a tally of
what the release must hold of its rows: how many, and a multiset digest of their forms at
the reported transformation. The checking party computes the same digest over the
release (on ciphertext, before anything is decrypted) and compares.

Multiset digest: the sum, modulo 2^256, of HMAC-SHA256(K, form) over the rows, where a
form is the row's ciphertext cells at the transformation (length-prefixed, with the
column names) and K is derived from a column key that every primary holds and the helper
does not (horizontal: the first column's key; vertical: the TID key). This is an additive
multiset hash keyed with a secret: without K the helper cannot compute the digest of any
multiset, so it can neither add, drop, duplicate nor swap a row (a swap changes a form
unless both rows have the same form, which leaves the release unchanged), nor make a
pseudotuple count as real. Sums make the digest of a union the sum of the parties'
digests, so in a horizontal split the checking party learns each party's row count and
digest, not which rows came from whom. Vertical: every party's digest covers the columns
it owns; the recipient checks each projection (the pairing of the projections across the
join is not covered: see docs/security-deviations.md).

Protocol B's helper suppresses: it tells each primary which of its rows it released and
which it suppressed (that is what each primary learns beyond the transformation), and a
suppressed row's form has '*' in every QI cell. Protocol C's key holder suppresses after
the check, so C's tallies cover the real rows unsuppressed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.errors import ProtocolError
from fedanon.protocols.kit.cellcrypt import SUPPRESSED, ColumnCiphers

MODULUS = 1 << 256
_LABEL = b"fedanon/release-tally/v1/"


def tally_key(shared_key: bytes, protocol: str, run_id: str) -> bytes:
    """The digest key: derived from a column key all primaries share, bound to protocol and run."""
    info = _LABEL + protocol.encode() + b"/" + run_id.encode("utf-8")
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(shared_key)


def shared_key_column(columns: Sequence[str], tid_column: str | None) -> str:
    """Which column's key every primary holds: the TID's in a vertical split, else the first column's."""
    if tid_column:
        return tid_column
    if not columns:
        raise ProtocolError("the run has no column to derive the release tally key from")
    return columns[0]


@dataclass
class Tally:
    """What one primary tells the checking party about its rows in the release."""

    party: str
    rows: int
    digest: str  # hex, 64 digits
    columns: list[str] = field(default_factory=list)
    transformation: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, blob: bytes, sender: str) -> "Tally":
        try:
            data = json.loads(blob)
            tally = cls(party=str(data["party"]), rows=int(data["rows"]), digest=str(data["digest"]),
                        columns=[str(c) for c in data["columns"]],
                        transformation={str(q): int(v) for q, v in data["transformation"].items()})
            int(tally.digest, 16)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ProtocolError(f"party {sender!r} sent a malformed release tally") from None
        if tally.party != sender:
            raise ProtocolError(f"party {sender!r} sent a release tally in the name of {tally.party!r}")
        return tally


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def digest(key: bytes, columns: Sequence[str], codes: np.ndarray, dictionaries: Sequence[Sequence[bytes]]) -> int:
    """Multiset digest of the rows `codes` (one column per name) over `dictionaries` (ciphertexts).

    Only distinct forms are hashed (count x HMAC), so it costs one HMAC per distinct row.
    """
    if codes.shape[0] == 0:
        return 0
    forms, counts = np.unique(np.ascontiguousarray(codes), axis=0, return_counts=True)
    used = [np.unique(forms[:, j]).tolist() for j in range(forms.shape[1])]
    cells = [{code: _field(name.encode("utf-8")) + _field(dictionary[code]) for code in codes_j}
             for name, dictionary, codes_j in zip(columns, dictionaries, used)]
    total = 0
    new, sha256, join = hmac.new, hashlib.sha256, b"".join
    for form, count in zip(forms.tolist(), counts.tolist()):
        data = join([cell[code] for cell, code in zip(cells, form)])
        total += count * int.from_bytes(new(key, data, sha256).digest(), "big")
    return total % MODULUS


def release_digest(key: bytes, table: EncodedTable, columns: Sequence[str], rows: np.ndarray | None = None) -> int:
    """The digest of the release `table` (ciphertext) projected onto `columns`, optionally a subset of its rows."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ProtocolError(f"the result lacks column(s) {missing}")
    index = [table.column_index(c) for c in columns]
    codes = table.codes[:, index] if rows is None else table.codes[rows][:, index]
    return digest(key, columns, codes, [table.dictionaries[i] for i in index])


def own_tally(me: str, key: bytes, sent: EncodedTable, columns: Sequence[str], included: np.ndarray,
              suppressed: np.ndarray | None, transformation: Mapping[str, int], hierarchies: Mapping[str, Hierarchy],
              ciphers: ColumnCiphers) -> Tally:
    """This primary's tally of `included` rows of its share (`sent`: plaintext, in the order it was sent).

    Each QI cell is generalized to its level with this party's hierarchy and encrypted with
    the column's deterministic cipher, which gives exactly the ciphertext the helper's
    generalization outputs; with `suppressed`, those rows carry '*' in every QI cell.
    """
    included = np.asarray(included, dtype=bool)
    if len(included) != sent.n_rows or (suppressed is not None and len(suppressed) != sent.n_rows):
        raise ProtocolError("the helper's release flags do not match this party's row count")
    codes = sent.codes[:, [sent.column_index(c) for c in columns]].copy()
    dictionaries: list[list[bytes]] = []
    for j, column in enumerate(columns):
        values = list(sent.dictionaries[sent.column_index(column)])
        if column in transformation:
            level = int(transformation[column])
            hierarchy = hierarchies.get(column)
            if hierarchy is None or not 0 <= level < hierarchy.height:
                raise ProtocolError(f"the reported level {level!r} of column {column!r} is not a level of its hierarchy")
            lookup = {row[0]: row[level] for row in hierarchy.rows}
            try:
                values = [lookup[v] for v in values]
            except KeyError:
                raise ProtocolError(f"a value of column {column!r} is not in its hierarchy") from None
            if suppressed is not None and suppressed.any():
                codes[np.asarray(suppressed, dtype=bool), j] = len(values)
                encrypted = ciphers.cipher(column).encrypt_many(values) + [SUPPRESSED]
                dictionaries.append(encrypted)
                continue
        dictionaries.append(ciphers.cipher(column).encrypt_many(values))
    value = digest(key, columns, codes[included], dictionaries)
    return Tally(me, int(included.sum()), f"{value:064x}", list(columns),
                 {q: int(v) for q, v in transformation.items()})


def transformation_problems(tallies: Mapping[str, Tally], transformation: Mapping[str, int]) -> list[str]:
    """One problem per party whose tally was made at another transformation than the result's: a
    helper that tells parties different nodes would make their tallies disagree for that reason
    alone, so this is checked (and reported) before any count or digest."""
    wanted = {q: int(v) for q, v in transformation.items()}
    return [f"the helper told party {party!r} another transformation than the result reports"
            for party, tally in tallies.items() if tally.transformation != wanted]


def check_tallies(tallies: Mapping[str, Tally], key: bytes, table: EncodedTable, rows: np.ndarray | None,
                  transformation: Mapping[str, int], vertical: bool) -> list[str]:
    """Compare the release (`rows` of `table`, ciphertext) with every primary's tally; public problems.

    Horizontal: released rows = sum of the announced rows, digest of the release = sum of
    the digests. Vertical: every party's projection has its announced rows and digest.
    """
    problems = transformation_problems(tallies, transformation)
    if problems:
        return problems
    released = table.n_rows if rows is None else int(np.count_nonzero(rows) if rows.dtype == bool else len(rows))
    if not vertical:
        announced = sum(t.rows for t in tallies.values())
        if released != announced:
            each = ", ".join(f"{p}: {t.rows}" for p, t in tallies.items())
            return [f"the result holds {released} rows, but the primaries announced {announced} ({each})"]
        columns = next(iter(tallies.values())).columns if tallies else []
        if any(t.columns != columns for t in tallies.values()):
            return ["the primaries' release tallies cover different columns"]
        expected = sum(int(t.digest, 16) for t in tallies.values()) % MODULUS
        if release_digest(key, table, columns, rows) != expected:
            problems.append("the result's rows are not the primaries' rows at the reported transformation "
                            "(the multiset digest differs: rows added, dropped, duplicated, swapped or altered)")
        return problems
    for party, tally in tallies.items():
        if tally.rows != released:
            problems.append(f"the result holds {released} rows, but party {party!r} announced {tally.rows}")
        elif release_digest(key, table, tally.columns, rows) != int(tally.digest, 16):
            problems.append(f"the result's columns of party {party!r} are not its rows at the reported transformation "
                            "(the multiset digest differs)")
    return problems
