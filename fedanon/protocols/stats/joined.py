"""Tables across the columns of several parties of a vertical split (statistics mode of B and C).

A marginal whose attributes several parties hold cannot be counted by any one of them: its cells
pair one party's values with another's for the same person. B's and C's helper already joins the
parties' encrypted columns on encrypted tuple identifiers for anonymization; here it joins the
same way and groups the joined rows per encrypted cell, while nobody but the primaries can tell
which cell is which:

* the key holder draws a join key and sends it directly (never via the helper) to the primaries
  that hold a part of a joined table and to the permuting primary; they derive from it the TID
  tokens' key (`cellcrypt.tid_tokens`, as B's anonymization) and, for every table and every
  party's part of it, a secret permutation σ of that part's cells (the product of its
  attributes' level domains, `part_permutation`);
* each primary holding a part sends the helper, in a random row order, every row's TID token
  and σ(its part's cell) -- a number, never a value. In C they pad with the same pseudotuples
  (identifiers derived from the join key) and one of them sends every row's counter encrypted
  under the key holder's Paillier key (1 real, 0 fake);
* the helper joins the rows on the tokens (`integration.join_on_tid`) and, per tuple of labels (a
  cell of the table with every part's cells relabelled by σ, in an order it cannot relate to the
  canonical one), B's helper counts the joined rows and encrypts every count alone under the key
  holder's Paillier key, C's multiplies the rows' counters (`sum_joined`) and never holds a count;
* the permuting primary (a primary other than the key holder) moves those ciphertexts into
  canonical order (`canonical_positions`) and folds them into its own packed count vector
  (`vectors.fold_ciphertexts`), whose fresh randomness hides where each one went. From there
  the counts travel as every other count: the helper adds the vectors (B: with its noise, drawn
  in canonical order as `fedanon stats` draws; C: every vector carries its primary's noise
  share), and only the key holder decrypts noisy sums.

B's helper learns each joined table's counts up to a relabelling of every party's part (and the
number of persons); C's helper only how many rows, pseudotuples included, share a relabelled
cell. The permuting primary learns nothing (Paillier ciphertexts); the key holder learns only the
noisy release. A helper colluding with any primary could name every cell (σ) -- the collusion
both protocols rule out anyway.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from fedanon.crypto.paillier import PaillierPublicKey
from fedanon.crypto.prp import BLOCK_BYTES, derive_key, permute_blocks
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.dp.marginals import MarginalSpec, cell_keys
from fedanon.errors import ProtocolError
from fedanon.protocols.c.pseudotuples import fake_tid
from fedanon.protocols.kit.cellcrypt import TID_TOKEN_BYTES, ColumnCiphers, random_permutation, token_keys
from fedanon.protocols.kit.integration import check_tids, join_on_tid

#: the domain of the join's ciphers and permutations (apart from every other purpose of a key)
JOIN_DOMAIN = b"fedanon/stats/join/v1"
#: the name the TID tokens' context binds (every party's TID column may be named alike or not)
TID_NAME = "tid"


@dataclass
class JoinPlan:
    """One table across several parties: its segment in the count vector, every attribute's
    number of cells, and its parts -- (party, positions of that party's attributes in the table)
    -- in the order the labels are combined."""

    segment: int
    shape: list[int]
    parts: list[tuple[str, list[int]]]

    @property
    def radices(self) -> list[int]:
        """The number of cells of every part (the product of its attributes' domains)."""
        return [int(np.prod([self.shape[i] for i in positions], dtype=np.int64)) for _, positions in self.parts]

    @property
    def cells(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def to_json(self) -> dict[str, Any]:
        return {"segment": self.segment, "shape": list(self.shape), "parts": [[p, list(ix)] for p, ix in self.parts]}

    @classmethod
    def from_json(cls, doc: Any) -> "JoinPlan":
        try:
            plan = cls(int(doc["segment"]), [int(s) for s in doc["shape"]],
                       [(str(p), [int(i) for i in ix]) for p, ix in doc["parts"]])
        except (KeyError, TypeError, ValueError):
            raise ProtocolError("corrupt join plan in the key holder's notice") from None
        positions = sorted(i for _, ix in plan.parts for i in ix)
        if positions != list(range(len(plan.shape))) or any(s < 1 for s in plan.shape):
            raise ProtocolError("the key holder's join plan does not cover every attribute of its table once")
        return plan


def plan_join(segment: int, spec: MarginalSpec, holders: Sequence[str], shape: Sequence[int]) -> JoinPlan:
    """The plan of one table whose attribute i is held by `holders[i]`: one part per party, parties
    in the order of their first attribute, each part's attributes in the table's order."""
    parts: dict[str, list[int]] = {}
    for position, party in enumerate(holders):
        parts.setdefault(party, []).append(position)
    if len(parts) < 2:
        raise ProtocolError(f"--stats-marginal {spec.describe()} is held by one party; it needs no join")
    return JoinPlan(segment, list(shape), list(parts.items()))


def part_permutation(join_key: bytes, run_id: str, segment: int, part: int, size: int) -> np.ndarray:
    """σ of one part: sigma[cell] = the label every primary gives that cell. The ranks of the cells'
    images under a keyed PRP (AES), so that only holders of the join key can compute or invert it."""
    context = JOIN_DOMAIN + f"/permutation/{run_id}/{segment}/{part}".encode("utf-8")
    blocks = np.zeros((size, BLOCK_BYTES), dtype=np.uint8)
    blocks[:, 8:] = np.arange(size, dtype=">u8").view(np.uint8).reshape(size, 8)
    images = np.frombuffer(permute_blocks(join_key, context, blocks.tobytes()), dtype=">u8").reshape(size, 2)
    order = np.lexsort((images[:, 1], images[:, 0]))
    sigma = np.empty(size, dtype=np.int64)
    sigma[order] = np.arange(size, dtype=np.int64)
    return sigma


def canonical_positions(join_key: bytes, run_id: str, plan: JoinPlan) -> np.ndarray:
    """out[j] = where the helper's count vector holds canonical cell j (row-major over the table's
    attributes, as `fedanon stats` lists the cells): every part's cell relabelled by its σ,
    combined in part order."""
    per_attribute = np.indices(plan.shape, dtype=np.int64).reshape(len(plan.shape), -1)
    out = np.zeros(plan.cells, dtype=np.int64)
    for part, ((_party, positions), radix) in enumerate(zip(plan.parts, plan.radices)):
        cell = np.zeros(plan.cells, dtype=np.int64)
        for i in positions:
            cell = cell * plan.shape[i] + per_attribute[i]
        out = out * radix + part_permutation(join_key, run_id, plan.segment, part, radix)[cell]
    return out


def tid_key(join_key: bytes) -> bytes:
    return derive_key(join_key, JOIN_DOMAIN + b"/tid")


def own_parts(me: str, table: EncodedTable, hierarchies: Mapping[str, Hierarchy], specs: Sequence[MarginalSpec],
              plans: Sequence[JoinPlan]) -> Iterator[tuple[JoinPlan, int, np.ndarray]]:
    """Every part of a joined table that party `me` holds, in plan order, with each of its rows'
    cell of that part (the cell number in the part's canonical order). `specs[k]` is the table of
    `plans[k]`. Both joins (the helper's here, A's ring) send these cells, each in its own disguise."""
    for spec, plan in zip(specs, plans):
        for part, (party, positions) in enumerate(plan.parts):
            if party != me:
                continue
            sub = MarginalSpec(tuple(spec.attributes[i] for i in positions), tuple(spec.levels[i] for i in positions))
            _domains, cells = cell_keys(table, dict(hierarchies), sub)
            yield plan, part, cells


def labelled_rows(join_key: bytes, run_id: str, me: str, tids: Sequence[str], table: EncodedTable,
                  hierarchies: Mapping[str, Hierarchy], specs: Sequence[MarginalSpec],
                  plans: Sequence[JoinPlan], fakes: int = 0, counters: PaillierPublicKey | None = None
                  ) -> dict[str, bytes]:
    """What a primary holding parts sends the helper: its rows in a random order, each as a TID
    token ("tids") and, per table it holds a part of, σ of the row's cell of that part
    ("labels/SEGMENT", big-endian uint32). `specs[k]` is the table of `plans[k]`.

    Protocol C pads with `fakes` pseudotuples: identifiers every primary derives alike from the
    join key (so the fakes join), each part's label copied from a random real row of this party
    (so a label's frequency does not tell fakes), and the counter party (`counters`: the key
    holder's Paillier key) sends every row's counter, Enc(1) for a real row and Enc(0) for a fake
    ("counters"), so that the helper sums counters, not rows."""
    n = len(tids)
    fakes = fakes if n else 0
    order = random_permutation(n + fakes)
    every = [*tids, *(fake_tid(tid_key(join_key), i) for i in range(fakes))]
    ciphers = ColumnCiphers(run_id, {TID_NAME: tid_key(join_key)}, JOIN_DOMAIN)
    tokens = np.frombuffer(ciphers.tid_tokens(TID_NAME, every), dtype=np.uint8).reshape(len(every), -1)
    out = {"tids": tokens[order].tobytes()}
    rng = np.random.default_rng(secrets.randbits(128))
    for plan, part, cells in own_parts(me, table, hierarchies, specs, plans):
        sigma = part_permutation(join_key, run_id, plan.segment, part, plan.radices[part])
        labels = sigma[cells]
        labels = np.concatenate([labels, labels[rng.integers(0, n, fakes)] if fakes else labels[:0]])
        out[f"labels/{plan.segment}"] = labels[order].astype(">u4").tobytes()
    if counters is not None:
        flags = np.concatenate([np.ones(n, dtype=np.int64), np.zeros(fakes, dtype=np.int64)])[order]
        out["counters"] = counters.ciphertexts_to_bytes(counters.encrypt_many(flags.tolist(), workers=1))
    return out


def senders(plans: Sequence[JoinPlan]) -> list[str]:
    """The parties that send labelled rows (every party holding a part), in first-seen order."""
    return list(dict.fromkeys(p for plan in plans for p, _ in plan.parts))


def _joined_cells(shares: Mapping[str, Mapping[str, bytes]], plans: Sequence[JoinPlan]
                  ) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """Join the senders' rows on their tokens: every joined row's (relabelled) cell per plan, and
    per sender its row of every joined row."""
    parties = list(shares)
    tables: dict[str, EncodedTable] = {}
    tokens: dict[str, np.ndarray] = {}
    for party in parties:
        parts = shares[party]
        blob = parts.get("tids", b"")
        rows = len(blob) // TID_TOKEN_BYTES
        tokens[party] = token_keys(blob, rows, f"rows of {party!r}")
        columns, blocks = [], []
        for plan in plans:
            for part, (holder, _positions) in enumerate(plan.parts):
                if holder != party:
                    continue
                labels = np.frombuffer(parts.get(f"labels/{plan.segment}", b""), dtype=">u4").astype(np.int64)
                if len(labels) != rows or (rows and (labels.min() < 0 or labels.max() >= plan.radices[part])):
                    raise ProtocolError(f"party {party!r} sent labels that do not fit table {plan.segment} "
                                        f"({len(labels)} for {rows} rows)")
                columns.append(f"{party}/{plan.segment}")
                blocks.append(labels[:, None])
        codes = np.concatenate(blocks, axis=1) if blocks else np.zeros((rows, 0), dtype=np.int64)
        tables[party] = EncodedTable(columns, codes, [[] for _ in columns])
    mismatch = check_tids(tokens)
    if mismatch is not None:
        raise ProtocolError("the parties' identifier tokens differ (duplicates or persons held by only some "
                            "parties); the joined tables cannot be counted")
    joined, alignment = join_on_tid(tables, tokens)
    return [combined_cells(joined, plan, [f"{party}/{plan.segment}" for party, _positions in plan.parts])
            for plan in plans], alignment


def combined_cells(joined: EncodedTable, plan: JoinPlan, columns: Sequence[str]) -> np.ndarray:
    """Every joined row's cell of the table `plan`: the cells of its parts (`columns`, in part
    order) as the digits of one mixed-radix number over the parts' radices. Both joins (the
    helper's here, A's master in `ring.py`) number a joined table's cells this way."""
    cell = np.zeros(joined.n_rows, dtype=np.int64)
    for column, radix in zip(columns, plan.radices):
        cell = cell * radix + joined.codes[:, joined.columns.index(column)].astype(np.int64)
    return cell


def count_joined(shares: Mapping[str, Mapping[str, bytes]], plans: Sequence[JoinPlan]) -> list[np.ndarray]:
    """B's helper: join the senders' rows on their tokens and count the joined rows per tuple of
    labels, one vector per plan in the helper's (relabelled) cell order."""
    cells, _alignment = _joined_cells(shares, plans)
    return [np.bincount(cell, minlength=plan.cells).astype(np.int64) for cell, plan in zip(cells, plans)]


def sum_joined(shares: Mapping[str, Mapping[str, bytes]], plans: Sequence[JoinPlan], key: PaillierPublicKey,
               counter_party: str) -> list[list[Any]]:
    """C's helper: join as `count_joined`, then multiply the counter party's encrypted counters per
    tuple of labels: Enc(real rows) per relabelled cell, which the helper cannot read."""
    cells, alignment = _joined_cells(shares, plans)
    counters = key.ciphertexts_from_bytes(shares[counter_party].get("counters", b""))
    rows = len(shares[counter_party].get("tids", b"")) // TID_TOKEN_BYTES
    if len(counters) != rows:
        raise ProtocolError(f"party {counter_party!r} sent {len(counters)} counters for {rows} rows")
    mine = [counters[r] for r in alignment[counter_party].tolist()]
    return [key.sum_by_class(mine, cell.tolist(), plan.cells) for cell, plan in zip(cells, plans)]
