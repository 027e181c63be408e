"""Protocol A's join of a table across several parties' columns (statistics mode, no helper).

A has no helper to join the parties' rows, but its anonymization already joins a vertical split
without one: every party's columns and identifiers travel round the ring of primaries under
every party's commutative key (`a.protocol.ring_encrypt`, rows and dictionaries re-permuted at
every hop), and A's master joins the fully encrypted rows and sees the class sizes of every
lattice node it checks. The statistics mode runs the same ring on the parts of the joined tables:

* every part holder makes one A share: per table it holds a part of, a column whose dictionary is
  the part's every cell (the product of its attributes' level domains, each cell hashed into the
  group with the run and the part bound in: padded, so the dictionary's size is the domain's) and
  whose code per row is the row's cell; plus every row's identifier hashed into the group. A
  primary that holds no part sends its identifiers only;
* R-PRR round the ring: every share leaves the ring encrypted under every party's key;
* every party sends the share it holds to A's master (the aggregator), which joins them on the
  encrypted identifiers (`integration.join_on_tid`) and counts the joined rows per tuple of
  encrypted labels, in its dictionaries' order. It encrypts every count alone under the key
  holder's Paillier key and sends them to the *permuting primary* -- a primary that is neither
  the key holder (it could decrypt them one by one) nor the master (it knows the counts);
* the master's dictionaries (no rows) go along a decryption chain that ends at the permuter:
  every party removes its layer, the permuter the last one, and recognizes each cell by hashing
  the public cell labels (`cell_inputs`). It moves the master's ciphertexts into canonical order
  and folds them into its own packed, noise-carrying count vector (`vectors.fold_ciphertexts`).

The master learns each joined table's counts up to a relabelling of every part's cells -- a
class-size vector of one node of A's lattice (the table's attributes at its levels, every other
column at the top) when the table's attributes are quasi-identifiers, which A's master sees in
every anonymization; frequency analysis of its own part can undo its own part's relabelling,
as in A's anonymization. The permuter learns the master's order of the cells, never a count or a
row; every other party sees group elements only. The master and the permuter together could name
every count: a collusion of two primaries, which A does not withstand in anonymization either.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping, Sequence

import numpy as np

from fedanon.crypto.commutative import CommutativeCipher, GroupDictionary
from fedanon.crypto.paillier import PaillierPublicKey
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.dp.marginals import MarginalSpec
from fedanon.errors import ProtocolError
from fedanon.protocols.a.protocol import ColumnKeys, OpCounter, Share, hash_input, ring_encrypt
from fedanon.protocols.kit import codec
from fedanon.protocols.kit.integration import check_tids, join_on_tid
from fedanon.protocols.stats.joined import JoinPlan, combined_cells, own_parts

#: the name the identifiers are hashed and encrypted under (each party's TID column may be named alike or not)
TID_NAME = "stats/tid"
#: topics of the ring, the shares sent to the master and the decryption chain of the labels
RING_TOPIC, HELD_TOPIC, LABELS_TOPIC = "s/enc", "s/held", "s/labels"


def part_column(plan: JoinPlan, part: int) -> str:
    """The name one part of one table travels under (public: the plans are)."""
    return f"stats/{plan.segment}/{part}"


def ring_columns(plans: Sequence[JoinPlan]) -> list[str]:
    """Every part's column and the identifiers': every party keeps one commutative key for each."""
    return [part_column(plan, k) for plan in plans for k in range(len(plan.parts))] + [TID_NAME]


def cell_inputs(run_id: str, column: str, size: int) -> list[bytes]:
    """What each of a part's cells is hashed into the group from: cell index, run and part bound in.
    Public, so that the permuter can recognize a fully decrypted label and nobody else sees one."""
    return [hash_input(run_id, column, str(cell)) for cell in range(size)]


def permuter_of_ring(primaries: Sequence[str], key_holder: str, master: str) -> str | None:
    """The first primary in the run's order that is neither the key holder nor the master (None with
    two primaries: then A counts no joined table)."""
    return next((p for p in primaries if p not in (key_holder, master)), None)


def own_share(cipher: type[CommutativeCipher], run_id: str, me: str, tids: Sequence[str], table: EncodedTable,
              hierarchies: Mapping[str, Hierarchy], specs: Sequence[MarginalSpec], plans: Sequence[JoinPlan],
              counter: OpCounter, workers: int | None = None) -> Share:
    """This party's share of the joined tables: a column per part it holds (codes: each row's cell of
    the part; dictionary: every cell of the part, hashed) and its hashed identifiers. `specs[k]` is
    the table of `plans[k]`."""
    columns: list[str] = []
    blocks: list[np.ndarray] = []
    dictionaries: list[list[bytes]] = []
    for plan, part, cells in own_parts(me, table, hierarchies, specs, plans):
        column = part_column(plan, part)
        columns.append(column)
        blocks.append(np.asarray(cells, dtype=np.int32)[:, None])
        dictionaries.append(GroupDictionary(cipher).encode(cell_inputs(run_id, column, plan.radices[part]),
                                                           workers=workers))
        counter.hashed += plan.radices[part]
    codes = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(tids), 0), dtype=np.int32)
    elements = GroupDictionary(cipher).encode([hash_input(run_id, TID_NAME, t) for t in tids], workers=workers)
    counter.hashed += len(tids)
    return Share(columns, codes, dictionaries, tids=elements)


def encrypt_round(transport: Any, ring: Sequence[str], me: str, keys: ColumnKeys, own: Share,
                  element_bytes: int) -> Share:
    """A's R-PRR on the statistics shares: returns the share this party holds, encrypted by every party."""
    i, n = ring.index(me), len(ring)
    return ring_encrypt(transport, ring[(i - 1) % n], ring[(i + 1) % n], n, keys, own, TID_NAME, element_bytes,
                        RING_TOPIC)


def count_encrypted_join(shares: Sequence[Share], plans: Sequence[JoinPlan]
                         ) -> tuple[list[np.ndarray], dict[str, list[bytes]]]:
    """The master: join the fully encrypted shares on their identifiers and count the joined rows per
    tuple of encrypted labels. Returns one count vector per plan, its cells in the order of the
    master's dictionaries (row-major over the parts, each part's cell its dictionary position), and
    those dictionaries per part column."""
    tables: dict[str, EncodedTable] = {}
    tokens: dict[str, np.ndarray] = {}
    dictionaries: dict[str, list[bytes]] = {}
    for i, share in enumerate(shares):
        if share.tids is None or len(share.tids) != share.n_rows:
            raise ProtocolError("a statistics share carries no identifiers")
        name = f"share {i}"
        tables[name] = EncodedTable(list(share.columns), share.codes, [[] for _ in share.columns])
        digests = b"".join(hashlib.sha256(t).digest() for t in share.tids)  # fixed-width join tokens
        tokens[name] = np.frombuffer(digests, dtype=">u8").reshape(share.n_rows, 4).astype(np.uint64)
        for column, dictionary in zip(share.columns, share.dictionaries):
            if column in dictionaries:
                raise ProtocolError(f"two shares carry the part {column!r}")
            dictionaries[column] = list(dictionary)
    if check_tids(tokens) is not None:
        raise ProtocolError("the parties' encrypted identifiers differ (duplicates or persons held by only some "
                            "parties); the joined tables cannot be counted")
    joined, _alignment = join_on_tid(tables, tokens)
    out = []
    for plan in plans:
        columns = [part_column(plan, part) for part in range(len(plan.radices))]
        for column, radix in zip(columns, plan.radices):
            if column not in dictionaries or len(dictionaries[column]) != radix \
                    or len(set(dictionaries[column])) != radix:
                raise ProtocolError(f"the share of part {column!r} does not carry its {radix} cells")
            codes = joined.codes[:, joined.columns.index(column)]
            if len(codes) and (codes.min() < 0 or codes.max() >= radix):
                raise ProtocolError(f"the share of part {column!r} has rows outside its cells")
        out.append(np.bincount(combined_cells(joined, plan, columns), minlength=plan.cells).astype(np.int64))
    return out, dictionaries


def decrypt_labels(keys: ColumnKeys, blob: bytes) -> dict[str, list[bytes]]:
    """One hop of the labels' decryption chain: remove this party's layer, keep the master's order."""
    columns, codes, dictionaries = codec.decode_table_parts(blob, "the joined tables' labels")
    table = keys.remove_layer(EncodedTable(columns, codes, dictionaries), set())
    return dict(zip(table.columns, table.dictionaries))


def encode_labels(labels: Mapping[str, Sequence[bytes]]) -> bytes:
    return codec.encode_table_parts(list(labels), np.zeros((0, len(labels)), dtype=np.int32),
                                    [list(d) for d in labels.values()])


def canonical_order(cipher: type[CommutativeCipher], run_id: str, plan: JoinPlan,
                    labels: Mapping[str, Sequence[bytes]]) -> np.ndarray:
    """The permuter: out[m] = the canonical cell (row-major over the table's attributes, as `fedanon
    stats` lists them) of the master's cell m, from the fully decrypted labels in the master's order."""
    digits = np.array(np.unravel_index(np.arange(plan.cells), plan.radices)).reshape(len(plan.radices), -1)
    attribute_index = np.zeros((len(plan.shape), plan.cells), dtype=np.int64)
    for part, ((_party, positions), radix) in enumerate(zip(plan.parts, plan.radices)):
        column = part_column(plan, part)
        expected = GroupDictionary(cipher).encode(cell_inputs(run_id, column, radix))
        where = {e: c for c, e in enumerate(expected)}
        got = list(labels.get(column, []))
        if len(got) != radix or set(got) != set(where):
            raise ProtocolError(f"the decrypted labels of part {column!r} are not its {radix} cells")
        cells = np.array([where[e] for e in got], dtype=np.int64)[digits[part]]
        for i, index in zip(positions, np.unravel_index(cells, [plan.shape[i] for i in positions])):
            attribute_index[i] = index
    return np.ravel_multi_index(tuple(attribute_index), plan.shape).astype(np.int64)


def fold_positions(plan_cells: Sequence[int], offsets: Sequence[int], orders: Sequence[np.ndarray],
                   cts: Sequence[Any]) -> dict[int, Any]:
    """Map the master's ciphertexts (plans concatenated, each in the master's order) to positions of
    the packed count vector (`offsets[k]`: where plan k's table starts)."""
    if len(cts) != sum(plan_cells):
        raise ProtocolError("the master's joined counts do not have the planned number of cells")
    out: dict[int, Any] = {}
    start = 0
    for cells, base, order in zip(plan_cells, offsets, orders):
        for m, canonical in enumerate(order.tolist()):
            out[int(base) + canonical] = cts[start + m]
        start += cells
    return out


def encrypt_counts(key: PaillierPublicKey, counts: Sequence[np.ndarray]) -> bytes:
    """The master's counts, each alone under the key holder's key (the permuter places them)."""
    return key.ciphertexts_to_bytes(key.encrypt_many([int(c) for v in counts for c in v.tolist()], workers=1))
