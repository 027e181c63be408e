"""Cell-wise deterministic encryption of encoded tables and hierarchies (Protocol B).

Only dictionaries are encrypted: after dictionary encoding every distinct value of a
column is encrypted once (§4.5.4), and the code matrix is left as is. One AES-SIV key
per column, with the run id and column name bound in as associated data, so equal
plaintexts give equal ciphertexts within one column of one run and nowhere else;
hierarchies use their column's cipher, which is what lets the helper generalize on
ciphertext.
"""

from __future__ import annotations

import os
from operator import itemgetter
from typing import Mapping, Sequence


import numpy as np

from fedanon.crypto.deterministic import DeterministicCipher
from fedanon.crypto.errors import DecryptionError
from fedanon.crypto.prp import permute_blocks
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.errors import ProtocolError

#: What the engine writes into every QI cell of a suppressed row. It is shorter than an
#: AES-SIV tag, so it can never collide with a ciphertext and is recognised on decryption.
SUPPRESSED = b"*"

#: Domain label of Protocol B's ciphers; another protocol passes its own (e.g. b"fedanon/C/v1").
B_DOMAIN = b"fedanon/B/v1"


def cipher_context(run_id: str, column: str, domain: bytes = B_DOMAIN) -> bytes:
    """Associated data of a column's cipher: protocol domain, run and column, length-prefixed."""
    run = run_id.encode("utf-8")
    col = column.encode("utf-8")
    return domain + len(run).to_bytes(4, "big") + run + len(col).to_bytes(4, "big") + col


class ColumnCiphers:
    """The deterministic ciphers of the columns one party may encrypt or decrypt."""

    def __init__(self, run_id: str, keys: Mapping[str, bytes], domain: bytes = B_DOMAIN) -> None:
        self._ciphers = {column: DeterministicCipher(key, cipher_context(run_id, column, domain))
                         for column, key in keys.items()}
        self._keys = dict(keys)
        self._run_id = run_id
        self._domain = domain

    def tid_tokens(self, column: str, values: Sequence[str]) -> bytes:
        """Join tokens of a TID column (see `tid_tokens`), bound to this run and column."""
        return tid_tokens(self.cipher(column), values, self._keys[column],
                          cipher_context(self._run_id, column, self._domain), self._domain)

    def __contains__(self, column: str) -> bool:
        return column in self._ciphers

    def cipher(self, column: str) -> DeterministicCipher:
        try:
            return self._ciphers[column]
        except KeyError:
            raise ProtocolError(f"no key for column {column!r} at this party") from None

    def encrypt_table(self, table: EncodedTable) -> EncodedTable:
        """Same codes, encrypted dictionaries (each distinct value encrypted once)."""
        dictionaries = [self.cipher(col).encrypt_many(d) for col, d in zip(table.columns, table.dictionaries)]
        return EncodedTable(list(table.columns), table.codes, dictionaries)

    def encrypt_hierarchy(self, hierarchy: Hierarchy, column: str | None = None) -> Hierarchy:
        """Encrypt every distinct cell of a hierarchy once, with its column's cipher."""
        cipher = self.cipher(column or hierarchy.attribute)
        distinct = list(dict.fromkeys(v for row in hierarchy.rows for v in row))
        mapping = dict(zip(distinct, cipher.encrypt_many(distinct)))
        rows = [[mapping[v] for v in row] for row in hierarchy.rows]
        # Bijective relabelling of a valid tree stays a valid tree: skip re-validation.
        return Hierarchy(hierarchy.attribute, rows, source=f"encrypted hierarchy of {hierarchy.attribute!r}")

    def decrypt_dictionary(self, column: str, dictionary: list[bytes], allow_suppressed: bool) -> list[bytes]:
        """Decrypt a column dictionary; the suppression marker passes through unchanged."""
        cipher = self.cipher(column)
        out: list[bytes] = []
        for value in dictionary:
            if allow_suppressed and value == SUPPRESSED:
                out.append(SUPPRESSED)
                continue
            try:
                out.append(cipher.decrypt(value))
            except DecryptionError as exc:
                raise ProtocolError(
                    f"a value of column {column!r} in the result does not decrypt with this run's key "
                    "(tampered or mixed-up result)"
                ) from exc
        return out


def encode_share(columns: Sequence[str], rows: Sequence[Sequence[str]], column_index: Sequence[int],
                 row_order: np.ndarray) -> EncodedTable:
    """Dictionary-encode a party's share with random row order AND random dictionary order.

    Why not `EncodedTable.from_rows`: that assigns codes in order of first appearance,
    which would tell the helper which value sat in the party's first row; here each
    dictionary is shuffled with the CSPRNG too, so codes carry no order information.
    Column-wise factorization also keeps the per-cell work to one dict lookup (ADULT
    shares encode in a few milliseconds), and only distinct values are UTF-8 encoded.
    """
    n = len(rows)
    codes = np.empty((n, len(columns)), dtype=np.int32)
    dictionaries: list[list[bytes]] = []
    for c, j in enumerate(column_index):
        column = list(map(itemgetter(j), rows))  # C-speed column extraction
        values = list(dict.fromkeys(column))
        lookup = {v: i for i, v in enumerate(values)}
        column_codes = np.fromiter(map(lookup.__getitem__, column), dtype=np.int32, count=n)
        shuffle = random_permutation(len(values))  # new code of old code i is inverse[i]
        inverse = np.empty(len(values), dtype=np.int32)
        inverse[shuffle] = np.arange(len(values), dtype=np.int32)
        codes[:, c] = inverse[column_codes]
        dictionaries.append([values[i].encode("utf-8") for i in shuffle.tolist()])
    return EncodedTable(list(columns), codes[row_order] if n else codes, dictionaries)


def random_permutation(n: int) -> np.ndarray:
    """A uniformly random permutation from the OS CSPRNG (argsort of 64-bit random keys)."""
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    keys = np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
    return np.argsort(keys, kind="stable").astype(np.int64)


def decode_columns(table: EncodedTable, dictionaries: Sequence[Sequence[str]]) -> list[list[str]]:
    """Rows of strings from codes + already-decrypted dictionaries, column-wise (fast)."""
    if table.n_rows == 0:
        return []
    cols = [np.asarray(list(d), dtype=object)[table.codes[:, c]] for c, d in enumerate(dictionaries)]
    return [list(row) for row in zip(*cols)]


TID_TOKEN_BYTES = 16


def tid_tokens(cipher: DeterministicCipher, values: Sequence[str], key: bytes | None = None,
               context: bytes = b"", domain: bytes = B_DOMAIN) -> bytes:
    """128-bit join tokens for tuple identifiers, concatenated (16 bytes per row).

    TIDs are only ever compared, never decrypted (the helper drops them after the join),
    so a deterministic pseudorandom token is all that must travel: a third the size of a
    full AES-SIV ciphertext, and fixed-width so the helper joins with vectorized sorts.

    * TIDs of at most 15 UTF-8 bytes (the usual case: record numbers, pseudonyms) become
      one AES block (value, zero padding, length byte) encrypted with AES-256 in ECB mode
      under a subkey derived from the column key and context: a keyed pseudorandom
      permutation of distinct blocks, computed for the whole column in one library call.
    * Longer TIDs use the synthetic IV of their AES-SIV encryption (RFC 5297 places
      V = S2V(K1, context, tid), a 128-bit PRF output, first).
    The choice depends only on the value, so every party maps a TID to the same token.
    """
    raw = [v.encode("utf-8") for v in values]
    n = len(raw)
    if n == 0:
        return b""
    lengths = np.fromiter(map(len, raw), dtype=np.int64, count=n)
    short = lengths <= TID_TOKEN_BYTES - 1
    out = np.empty((n, TID_TOKEN_BYTES), dtype=np.uint8)
    if short.any():
        if key is None:
            raise ProtocolError("TID tokens need the column key")
        idx = np.flatnonzero(short)
        blocks = np.zeros((len(idx), TID_TOKEN_BYTES), dtype=np.uint8)
        packed = np.array([raw[i] for i in idx.tolist()], dtype=f"S{TID_TOKEN_BYTES - 1}")
        blocks[:, :TID_TOKEN_BYTES - 1] = packed.view(np.uint8).reshape(len(idx), TID_TOKEN_BYTES - 1)
        blocks[:, TID_TOKEN_BYTES - 1] = lengths[idx]
        permuted = permute_blocks(key, domain + b"/tid-token-prp" + context, blocks.tobytes())
        out[idx] = np.frombuffer(permuted, dtype=np.uint8).reshape(len(idx), TID_TOKEN_BYTES)
    for i in np.flatnonzero(~short).tolist():
        out[i] = np.frombuffer(cipher.encrypt(raw[i])[:TID_TOKEN_BYTES], dtype=np.uint8)
    return out.tobytes()


def token_keys(tokens: bytes, rows: int, what: str, width: int = TID_TOKEN_BYTES) -> np.ndarray:
    """Tokens of `width` bytes (a multiple of 8; e.g. 32 for EC group elements) as an
    (n, width/8) uint64 array, sortable with `integration.check_tids`/`join_on_tid`."""
    if width <= 0 or width % 8:
        raise ProtocolError(f"{what}: TID token width {width} is not a positive multiple of 8 bytes")
    if len(tokens) != rows * width:
        raise ProtocolError(f"{what}: {len(tokens)} bytes of TID tokens for {rows} rows "
                            f"(expected {rows * width})")
    return np.frombuffer(tokens, dtype=">u8").reshape(rows, width // 8).astype(np.uint64)


def utf8_dictionary(column: str, values: Sequence[bytes]) -> list[bytes]:
    """A decrypted dictionary, kept as bytes, after checking that every value is UTF-8 text
    (what the output file and the coordinator will read it as)."""
    try:
        for value in values:
            value.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(f"a decrypted value of column {column!r} is not UTF-8") from None
    return list(values)


def verify_suppression(table: EncodedTable, mask: np.ndarray, qis: set[str]) -> None:
    """The engine's suppression mask must match the result: exactly the flagged rows carry '*' QIs.

    Read on the codes: per QI column, which dictionary entries are '*', looked up for the
    flagged rows (a dictionary may hold '*' more than once; each such entry counts)."""
    if len(mask) != table.n_rows:
        raise ProtocolError(f"suppression mask covers {len(mask)} rows, the result has {table.n_rows}")
    flagged = np.flatnonzero(np.asarray(mask, dtype=bool))
    if not len(flagged):
        return
    for c, (column, dictionary) in enumerate(zip(table.columns, table.dictionaries)):
        if column not in qis:
            continue
        is_star = np.fromiter((v == SUPPRESSED for v in dictionary), dtype=bool, count=len(dictionary))
        if not is_star[table.codes[flagged, c]].all():
            raise ProtocolError("the result marks a row as suppressed but it still has QI values")
