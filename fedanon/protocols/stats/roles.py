"""The statistics mode of Protocols A, B and C: noisy counts of the pooled table, summed under encryption.

A run whose options hold `statistics` (`dp.statistics.StatisticsRequest`) releases the total
row count and marginals of the table the primaries hold together, as `fedanon stats` does
for one table, and anonymizes nothing. In a horizontal split every primary counts its own rows
in every cell; in a vertical split each table is counted by the one primary that holds all of
its attributes, the total by the key holder, over the persons every party holds (checked by
digest). A table across several parties' columns needs a join: B's and C's helpers join
(`joined.py`; B's counts the joined rows, C's adds their encrypted counters); A, without a helper,
joins round its ring of primaries under commutative encryption (`ring.py`: every part holder's
share goes round the ring as s/enc/<hop>, every primary sends the master the share it holds as
s/held, the master sends its encrypted counts to the permuter as s/joined and its labels along the
decryption chain as s/labels; no join key).

encrypt    primary    -> key holder   s/cells   (vertical) the tables (and parts of tables) it holds, their
                                                cells, its persons' digest
           key holder -> every party  s/key     its fresh Paillier public key, the segment sizes;
                                                horizontal: to primaries also the cells' digest
                                                (`counts.py`); vertical: who counts each table, the join plans
           key holder -> primaries    s/join-key (B, C: joined tables) the join key, directly, never via the helper,
                                                to the part holders and the permuter
           part holder -> helper      s/rows    (B, C: joined tables) TID tokens and permuted cell labels per row
                                                (C: pseudotuples too, and from one party every row's Enc(counter))
           helper     -> permuter     s/joined  (B, C: joined tables) Enc(count) per relabelled cell
           primary    -> aggregator   s/counts  Enc(own counts [+ own noise shares]) per cell (the permuter's
                                                with the joined counts folded in, in canonical order)
integrate  the aggregator multiplies the ciphertexts cell by cell (= adds the counts) [B: and Enc(its noise)]
decrypt    aggregator -> key holder   s/sums    the encrypted noisy sums (+ how the noise was drawn)
           key holder -> every party  s/done    (no data)

The key holder is the run's result recipient. It is the only party that decrypts anything,
and all it decrypts is one noisy sum per cell. The aggregator -- the helper in B and C, in A
(which has none) the primary after the key holder, A's master -- sees only Paillier
ciphertexts (and how many cells each table has, which the hierarchies' shapes tell anyway).
Who draws the noise is the difference between the protocols:

* **B** (`noise="helper"`): the helper draws exact discrete Laplace noise (OpenDP) and adds it
  under encryption. B trusts its helper not to collude with a primary; only a collusion of
  the helper with the key holder could remove the noise.
* **C and A** (`noise="joint"`): every primary adds its own share of the noise
  (`dp/shares.py`), drawn so that any n − 1 shares already sum to the full discrete Laplace
  noise: no party, the key holder included, knows enough of the noise to remove it, and the
  aggregator adds none (in A it is a primary and adds its share like every other).

With a seed (tests only) every party draws from its own seeded stream, named by the party.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedanon.crypto.paillier import PaillierPrivateKey, PaillierPublicKey, generate_paillier_keypair
from fedanon.data.table import EncodedTable
from fedanon.dp.randomness import randomness
from fedanon.dp.shares import MECHANISM as SHARES_MECHANISM
from fedanon.dp.shares import noise_shares, share_generator
from fedanon.dp.statistics import StatisticsRequest, assemble, domains, segment_sizes
from fedanon.errors import ProtocolError
from fedanon.protocols.kit.api import RoleContext, RoleOutcome
from fedanon.protocols.kit.roles import (
    DataHolder,
    HelperRole,
    LocalFailure,
    Verdict,
    guarded,
    receive_control,
    role_report,
    send_control,
)
from fedanon.protocols.kit.validation import LocalProblem
from fedanon.protocols.registry import STATISTICS_OPTION
from fedanon.dp.marginals import MAX_CELLS, level_domain
from fedanon.protocols.stats.counts import cells_digest, held_marginals, own_counts, persons_digest
from fedanon.protocols.c.pseudotuples import pseudotuple_count, pseudotuple_share
from fedanon.protocols.stats.joined import (JoinPlan, canonical_positions, count_joined, labelled_rows, plan_join,
                                            senders, sum_joined)
from fedanon.protocols.stats.vectors import add_vectors, decrypt_vector, encrypt_vector, fold_ciphertexts
from fedanon.protocols.a.protocol import ColumnKeys, OpCounter, Share
from fedanon.protocols.a.protocol import Options as RingOptions
from fedanon.protocols.stats.ring import (HELD_TOPIC, LABELS_TOPIC, canonical_order, count_encrypted_join,
                                          decrypt_labels, encode_labels, encrypt_counts, encrypt_round, fold_positions,
                                          own_share, permuter_of_ring, ring_columns)

PHASES = ("encrypt", "integrate", "decrypt")
#: "helper": the aggregating helper draws the noise (B); "joint": every primary draws a share (C, A)
NOISE_MODES = ("helper", "joint")
#: the splits it counts: horizontal (every primary counts every table over its rows) and vertical
#: (each table at the one primary that holds its attributes, over the persons all of them hold)
SPLITS = ("horizontal", "vertical")

@dataclass
class KeyNotice(Verdict):
    """The key holder's s/key: the counter key travels as a part; sizes and (to primaries) the digest here;
    in a vertical split, which primary counts each segment."""

    sizes: list[int] = field(default_factory=list)
    digest: str = ""
    owners: list[str] = field(default_factory=list)
    joins: list[dict[str, Any]] = field(default_factory=list)  # `joined.JoinPlan`s: tables across parties


@dataclass
class CellsNotice(Verdict):
    """A primary's s/cells to the key holder (vertical): the tables it counts, with their cells (hex)
    per attribute, and the digest of its persons."""

    marginals: dict[str, list[list[str]]] = field(default_factory=dict)
    persons: str = ""
    parts: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # table -> attribute -> cells (hex)


@dataclass
class Plan:
    """What a primary knows once the key holder has answered: the key (and, at the key holder, its
    secret half), every segment's size, which segments this party counts, and (key holder) the cells."""

    key: PaillierPublicKey
    secret: PaillierPrivateKey | None
    sizes: list[int]
    counted: list[bool]
    domains: list[list[list[bytes]]]
    joins: list[JoinPlan] = field(default_factory=list)
    join_key: bytes = b""


def request_of(ctx: RoleContext) -> StatisticsRequest:
    """The run's statistics request; this mode counts a horizontal split only."""
    request = StatisticsRequest.from_options(ctx.settings.options.get(STATISTICS_OPTION))
    if ctx.settings.distribution not in SPLITS:
        raise ProtocolError(f"the statistics mode of Protocol {ctx.settings.protocol} counts a horizontal or a "
                            f"vertical split, not a {ctx.settings.distribution} one")
    return request


def mechanism_facts(noise: str, rng_name: str, seeded: bool) -> dict[str, Any]:
    if noise == "helper":
        mechanism = "discrete Laplace (seeded, tests only)" if seeded else "discrete Laplace (OpenDP, exact)"
        return {"mechanism": mechanism, "randomness": rng_name, "seeded": seeded}
    return {"mechanism": SHARES_MECHANISM,
            "randomness": "seeded (tests only)" if seeded else "OS entropy at every primary",
            "seeded": seeded}


def split_segments(values: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    return np.split(values, np.cumsum(sizes)[:-1]) if sizes else []


def aggregator_of(ctx: RoleContext) -> str:
    """The party that adds the encrypted counts: the helper, or -- in a protocol without one (A) --
    the primary after the key holder in the run's order (A's master), never the key holder."""
    helpers = ctx.settings.helpers
    if len(helpers) > 1:
        raise ProtocolError(f"the statistics mode needs at most one helper, the run names {len(helpers)}")
    if helpers:
        return helpers[0]
    primaries = ctx.settings.primaries
    if len(primaries) < 2:
        raise ProtocolError("without a helper the statistics mode needs at least two primaries: the one that adds "
                            "the encrypted counts must not hold the key")
    return primaries[(primaries.index(ctx.settings.result_recipient) + 1) % len(primaries)]


def permuter_of(ctx: RoleContext) -> str:
    """The primary that puts the helper's encrypted counts of joined tables into canonical order:
    the first primary in the run's order that is not the key holder (it must not decrypt)."""
    return next(p for p in ctx.settings.primaries if p != ctx.settings.result_recipient)


def joined_facts(request: StatisticsRequest, joins: list[JoinPlan], permuter: str, noise: str,
                 master: str = "") -> dict[str, Any]:
    """What the release says about its tables across several parties' columns (`master`: A's, which
    joins round the ring; empty where a helper joins)."""
    first = 1 if request.total else 0
    if master:
        return {"tables": [request.marginals[j.segment - first].describe() for j in joins],
                "how": f"the primaries' parts went round the ring under every primary's commutative key; the master "
                       f"{master!r} joined the fully encrypted rows and counted them per encrypted cell; primary "
                       f"{permuter!r} learnt the cells' order from the decrypted labels and put the encrypted counts "
                       "into canonical order",
                "master_learns": "each joined table's counts up to a relabelling of every party's part of it (the "
                                 "class sizes of one lattice node, as in A's anonymization)"}
    if noise == "helper":
        how = "counted them per cell"
        learns = "each joined table's counts up to a relabelling of every party's part of it"
    else:
        how = "multiplied their encrypted counters (pseudotuples count 0) per cell"
        learns = ("how many joined rows, pseudotuples included, fall into each relabelled cell; no count "
                  "(the counters are encrypted)")
    return {"tables": [request.marginals[j.segment - first].describe() for j in joins],
            "how": f"the helper joined the parties' rows on encrypted identifiers and {how}, the cells relabelled "
                   f"by secret permutations of the primaries; primary {permuter!r} put the encrypted counts into "
                   "canonical order",
            "helper_learns": learns}


def who(noise: str, aggregator: str, has_helper: bool) -> dict[str, str]:
    """Who counted, who drew the noise and who could remove it (copied into every release)."""
    adder = "the helper" if has_helper else f"primary {aggregator!r} (it holds no key)"
    out = {"counts": f"every primary its own rows; {adder} adds them under encryption without seeing them",
           "aggregator": aggregator}
    if noise == "helper":
        out.update(noise="the helper (exact discrete Laplace), added under encryption",
                   could_remove_noise="only the helper together with the key holder: Protocol "
                                      "B assumes the helper colludes with no primary")
    else:
        out.update(noise="every primary one share; any n - 1 shares sum to the full discrete Laplace noise",
                   could_remove_noise="no single party; all primaries together (each knows only its own share)")
    return out


def aggregate(key: PaillierPublicKey, sizes: list[int], blobs: list[bytes], noise: str,
              request: StatisticsRequest, me: str) -> tuple[bytes, str]:
    """The aggregator's step: add the encrypted vectors cell by cell; in B's mode also the noise it
    draws itself (in the order `fedanon stats` draws). Returns the sums and the noise's source."""
    size = sum(sizes)
    summed = add_vectors(key, blobs, size, "encrypted counts")
    if noise != "helper":
        return summed, ""
    rng = randomness(request.seed, stream=me)
    drawn = [rng.discrete_laplace(n, request.scale) for n in sizes]
    return add_vectors(key, [summed, encrypt_vector(key, np.concatenate(drawn))], size, "noise"), rng.name


class _Primary(DataHolder):
    def __init__(self, ctx: RoleContext, noise: str, joins: bool = False) -> None:
        super().__init__(ctx)
        self.noise = noise
        self.joins = joins
        self.request = request_of(ctx)
        self.recipient = self.settings.result_recipient
        self.aggregator = aggregator_of(ctx)
        #: without a helper (A) a joined table is joined round the ring of primaries (`ring.py`)
        self.ring = not self.settings.helpers

    def _plan_horizontal(self, others: list[str], helpers: list[str]) -> Plan:
        """Every primary counts every table; the key holder's digest shows they count the same cells."""
        request, transport = self.request, self.transport
        marginal_domains = domains(request, self.local.hierarchies)
        sizes = segment_sizes(request, marginal_domains)
        digest = cells_digest(request, marginal_domains)
        counted = [True] * len(sizes)
        if self.me == self.recipient:
            secret = generate_paillier_keypair()
            for party in others:
                send_control(transport, party, "s/key", KeyNotice(sizes=sizes, digest=digest),
                             key=secret.public_key.to_bytes())
            for party in helpers:
                send_control(transport, party, "s/key", KeyNotice(sizes=sizes), key=secret.public_key.to_bytes())
            return Plan(secret.public_key, secret, sizes, counted, marginal_domains)
        notice, parts = receive_control(transport, self.recipient, "s/key", KeyNotice, "counter key")
        notice.raise_if_stopped()
        if notice.digest != digest or notice.sizes != sizes:
            text = (f"party {self.me!r}: the cells of the requested tables differ from the key holder's "
                    "(the parties' hierarchies of these attributes are not the same)")
            raise LocalFailure([LocalProblem(text, text)])
        return Plan(PaillierPublicKey.from_bytes(parts.get("key", b"")), None, sizes, counted, marginal_domains)

    def _plan_vertical(self, others: list[str], helpers: list[str]) -> Plan:
        """Each table is counted by the one primary that holds all its attributes (the total by the key
        holder), or -- where the protocol joins (B, C) and several parties hold its attributes -- on the
        helper's join (`joined.py`). The others tell the key holder which tables or parts of tables they
        hold, with those attributes' cells (the release names them anyway) and a digest of their persons;
        the key holder checks that every table has one counter (or every attribute of a joined table one
        holder) and every party the same persons, then sends the key, the sizes and the join plans."""
        request, transport = self.request, self.transport
        tid = self.local.tid_column
        columns = [c for c in self.local.columns if c != tid]
        held = held_marginals(request, columns, self.settings.protocol, self.joins)
        mine = {i: [level_domain(self.local.hierarchies[a], lv) for a, lv in zip(spec.attributes, spec.levels)]
                for i, (spec, h) in enumerate(zip(request.marginals, held)) if h}
        parts = {i: {a: level_domain(self.local.hierarchies[a], lv) for a, lv in zip(spec.attributes, spec.levels)
                     if a in columns}
                 for i, (spec, h) in enumerate(zip(request.marginals, held))
                 if not h and any(a in columns for a in spec.attributes)}
        tids = [] if tid is None else [row[self.local.columns.index(tid)] for row in self.local.rows]
        persons = persons_digest(self.settings.run_id, tids)
        first = 1 if request.total else 0
        if self.me != self.recipient:
            send_control(transport, self.recipient, "s/cells",
                         CellsNotice(marginals={str(i): [[v.hex() for v in d] for d in doms] for i, doms in mine.items()},
                                     persons=persons,
                                     parts={str(i): {a: [v.hex() for v in d] for a, d in doms.items()}
                                            for i, doms in parts.items()}))
            notice, received = receive_control(transport, self.recipient, "s/key", KeyNotice, "counter key")
            notice.raise_if_stopped()
            counted = [owner == self.me for owner in notice.owners]
            joins = [JoinPlan.from_json(j) for j in notice.joins]
            if len(notice.sizes) != request.queries or len(counted) != request.queries \
                    or any(counted[first + i] != (i in mine) for i in range(len(request.marginals))) \
                    or not self._joins_match(joins, parts, first):
                raise ProtocolError(f"party {self.me!r}: the key holder's plan does not match the tables it holds")
            join_key = b""
            if joins and not self.ring and (self.me in senders(joins) or self.me == permuter_of(self.ctx)):
                sent, keys = receive_control(transport, self.recipient, "s/join-key", Verdict, "join key")
                sent.raise_if_stopped()
                join_key = keys.get("key", b"")
                if len(join_key) != 32:
                    raise ProtocolError(f"party {self.me!r}: the key holder's join key is not 256 bits")
            return Plan(PaillierPublicKey.from_bytes(received.get("key", b"")), None, list(notice.sizes), counted, [],
                        joins, join_key)
        owners: dict[int, list[str]] = {i: [self.me] for i in mine}
        cells: dict[int, list[list[bytes]]] = dict(mine)
        holders: dict[int, dict[str, list[tuple[str, list[bytes]]]]] = {
            i: {a: [(self.me, d)] for a, d in doms.items()} for i, doms in parts.items()}
        problems = []
        for party in others:
            notice, _ = receive_control(transport, party, "s/cells", CellsNotice, f"cells of {party!r}")
            if notice.persons != persons:
                problems.append(f"party {party!r} holds other persons than the key holder")
            for index, doms in notice.marginals.items():
                i = int(index)
                if not 0 <= i < len(request.marginals):
                    raise ProtocolError(f"party {party!r} claims a table the request does not have")
                owners.setdefault(i, []).append(party)
                cells[i] = [[bytes.fromhex(v) for v in d] for d in doms]
            for index, attributes in notice.parts.items():
                i = int(index)
                if not (self.joins and 0 <= i < len(request.marginals)) \
                        or not set(attributes) <= set(request.marginals[i].attributes):
                    raise ProtocolError(f"party {party!r} claims a part of a table the request does not have")
                for a, d in attributes.items():
                    holders.setdefault(i, {}).setdefault(a, []).append((party, [bytes.fromhex(v) for v in d]))
        joins: list[JoinPlan] = []
        for i, spec in enumerate(request.marginals):
            if i in holders:
                by = holders[i]
                for a in spec.attributes:
                    if len(by.get(a, [])) != 1 or i in owners:
                        held_by = [p for p, _ in by.get(a, [])] + owners.get(i, [])
                        problems.append(f"attribute {a!r} of --stats-marginal {spec.describe()} is held by "
                                        f"{' and '.join(repr(p) for p in held_by) or 'no party'}; it must be held "
                                        "by exactly one")
                if problems:
                    continue
                cells[i] = [by[a][0][1] for a in spec.attributes]
                shape = [len(d) for d in cells[i]]
                if int(np.prod(shape, dtype=np.float64)) > MAX_CELLS:
                    problems.append(f"--stats-marginal {spec.describe()}: more than {MAX_CELLS:,} cells")
                    continue
                joins.append(plan_join(first + i, spec, [by[a][0][0] for a in spec.attributes], shape))
            elif len(owners.get(i, [])) != 1:
                problems.append(f"--stats-marginal {spec.describe()} is held by "
                                f"{' and '.join(repr(p) for p in owners.get(i, [])) or 'no party'}; it must be "
                                "held by exactly one")
        if joins and self.ring and permuter_of_ring(self.settings.primaries, self.me, self.aggregator) is None:
            problems.append(f"Protocol {self.settings.protocol} counts a table across several parties' columns with "
                            "at least three primaries: the primary that puts the master's encrypted counts into "
                            "canonical order must be neither the key holder nor the master")
        if problems:
            text = "the statistics run stopped: " + "; ".join(problems)
            raise LocalFailure([LocalProblem(text, text)])
        marginal_domains = [cells[i] for i in range(len(request.marginals))]
        sizes = segment_sizes(request, marginal_domains)
        order = ([self.me] if request.total else []) + [owners[i][0] if i in owners else ""
                                                         for i in range(len(request.marginals))]
        secret = generate_paillier_keypair()
        for party in [*others, *helpers]:
            send_control(transport, party, "s/key",
                         KeyNotice(sizes=sizes, owners=order, joins=[j.to_json() for j in joins]),
                         key=secret.public_key.to_bytes())
        join_key = os.urandom(32) if joins and not self.ring else b""
        needing = set(senders(joins)) | {permuter_of(self.ctx)} if join_key else set()
        for party in [p for p in others if p in needing]:  # directly, over the primaries' own channel: never the helper
            send_control(transport, party, "s/join-key", Verdict(), key=join_key)
        return Plan(secret.public_key, secret, sizes, [o == self.me for o in order], marginal_domains,
                    joins, join_key)

    def _joins_match(self, joins: list[JoinPlan], parts: dict[int, dict[str, list[bytes]]], first: int) -> bool:
        """The key holder's join plans put exactly the attributes this party holds of each table in its part."""
        planned = {}
        for plan in joins:
            spec = self.request.marginals[plan.segment - first] if 0 <= plan.segment - first < len(
                self.request.marginals) else None
            if spec is None or len(plan.shape) != len(spec.attributes):
                return False
            for party, positions in plan.parts:
                if party == self.me:
                    planned[plan.segment - first] = {spec.attributes[p] for p in positions}
        return planned == {i: set(doms) for i, doms in parts.items()}

    def _send_labelled_rows(self, plan: Plan, table: EncodedTable) -> None:
        """A primary holding a part of a joined table: its rows' TID tokens and cell labels to the helper."""
        tid = self.local.tid_column
        if tid is None:
            raise ProtocolError(f"party {self.me!r} has no identifier column to join its rows on")
        t = self.local.columns.index(tid)
        first = 1 if self.request.total else 0
        specs = [self.request.marginals[j.segment - first] for j in plan.joins]
        joint = self.noise == "joint"  # C: pseudotuples, and the first sender's encrypted counters
        fakes = pseudotuple_count(len(self.local.rows), pseudotuple_share(self.settings.options)) if joint else 0
        counters = plan.key if joint and self.me == senders(plan.joins)[0] else None
        parts = labelled_rows(plan.join_key, self.settings.run_id, self.me, [row[t] for row in self.local.rows],
                              table, self.local.hierarchies, specs, plan.joins, fakes, counters)
        send_control(self.transport, self.aggregator, "s/rows", Verdict(), **parts)

    def _fold_joined(self, plan: Plan, blob: bytes) -> bytes:
        """The permuting primary: the helper's per-cell ciphertexts of the joined tables, moved into
        canonical order and folded into this party's own encrypted counts (`joined.py`)."""
        sent, parts = receive_control(self.transport, self.aggregator, "s/joined", KeyNotice, "joined counts")
        sent.raise_if_stopped()
        cts = plan.key.ciphertexts_from_bytes(parts.get("counts", b""))
        if sent.sizes != [j.cells for j in plan.joins] or len(cts) != sum(sent.sizes):
            raise ProtocolError("the helper's joined counts do not have the planned number of cells")
        offsets = np.concatenate([[0], np.cumsum(plan.sizes)]).astype(np.int64)
        cells: dict[int, Any] = {}
        start = 0
        for join in plan.joins:
            positions = canonical_positions(plan.join_key, self.settings.run_id, join)
            base = int(offsets[join.segment])
            for j, at in enumerate(positions.tolist()):
                cells[base + j] = cts[start + at]
            start += join.cells
        return fold_ciphertexts(plan.key, blob, sum(plan.sizes), cells)

    def _permuter(self) -> str:
        if not self.ring:
            return permuter_of(self.ctx)
        permuter = permuter_of_ring(self.settings.primaries, self.recipient, self.aggregator)
        assert permuter is not None, "the key holder's plan checks that there are three primaries"
        return permuter

    def _ring_join(self, plan: Plan, table: EncodedTable, blob: bytes) -> bytes:
        """A (no helper): every primary takes part in the ring join of the joined tables (`ring.py`); the
        master counts the encrypted join, the permuter folds its counts into `blob` in canonical order."""
        request, transport, run_id = self.request, self.transport, self.settings.run_id
        options = RingOptions.parse(self.settings.options)
        cipher, primaries = options.cipher, list(self.settings.primaries)
        counter = OpCounter()
        keys = ColumnKeys(self.me, cipher, ring_columns(plan.joins), options.workers, counter)
        first = 1 if request.total else 0
        specs = [request.marginals[j.segment - first] for j in plan.joins]
        tid = self.local.tid_column
        if tid is None:
            raise ProtocolError(f"party {self.me!r} has no identifier column to join its rows on")
        t = self.local.columns.index(tid)
        own = own_share(cipher, run_id, self.me, [row[t] for row in self.local.rows], table, self.local.hierarchies,
                        specs, plan.joins, counter, options.workers)
        held = encrypt_round(transport, primaries, self.me, keys, own, cipher.element_bytes)
        master, permuter = self.aggregator, self._permuter()
        start = primaries.index(master)
        chain = [p for p in primaries[start:] + primaries[:start] if p != permuter] + [permuter]
        if self.me == master:
            shares = [held]
            for party in [p for p in primaries if p != self.me]:
                _sent, parts = receive_control(transport, party, HELD_TOPIC, Verdict, f"joined share from {party!r}")
                shares.append(Share.decode(parts.get("share", b""), f"joined share from {party!r}",
                                           cipher.element_bytes))
            counts, labels = count_encrypted_join(shares, plan.joins)
            send_control(transport, permuter, "s/joined", KeyNotice(sizes=[j.cells for j in plan.joins]),
                         counts=encrypt_counts(plan.key, counts))
            stripped = decrypt_labels(keys, encode_labels(labels))
            send_control(transport, chain[1], LABELS_TOPIC, Verdict(), labels=encode_labels(stripped))
            return blob
        send_control(transport, master, HELD_TOPIC, Verdict(), share=held.encode())
        before, after = chain[chain.index(self.me) - 1], chain[chain.index(self.me) + 1:]
        _sent, parts = receive_control(transport, before, LABELS_TOPIC, Verdict, f"labels from {before!r}")
        stripped = decrypt_labels(keys, parts.get("labels", b""))
        if after:
            send_control(transport, after[0], LABELS_TOPIC, Verdict(), labels=encode_labels(stripped))
            return blob
        sent, parts = receive_control(transport, master, "s/joined", KeyNotice, "joined counts")
        sent.raise_if_stopped()
        if sent.sizes != [j.cells for j in plan.joins]:
            raise ProtocolError("the master's joined counts do not have the planned number of cells")
        offsets = np.concatenate([[0], np.cumsum(plan.sizes)]).astype(np.int64)
        orders = [canonical_order(cipher, run_id, join, stripped) for join in plan.joins]
        cells = fold_positions([j.cells for j in plan.joins], [int(offsets[j.segment]) for j in plan.joins], orders,
                               plan.key.ciphertexts_from_bytes(parts.get("counts", b"")))
        return fold_ciphertexts(plan.key, blob, sum(plan.sizes), cells)

    def run(self) -> RoleOutcome:
        request, transport, timer = self.request, self.transport, self.timer
        others = [p for p in self.settings.primaries if p != self.me]
        helpers = self.settings.helpers
        aggregating = self.me == self.aggregator
        outcome = RoleOutcome()
        with timer.phase("encrypt"):
            vertical = self.settings.distribution == "vertical"
            plan = (self._plan_vertical if vertical else self._plan_horizontal)(others, helpers)
            key, secret, sizes, marginal_domains = plan.key, plan.secret, plan.sizes, plan.domains
            table = EncodedTable.from_rows(self.local.columns, self.local.rows)
            if self.me in senders(plan.joins) and not self.ring:
                self._send_labelled_rows(plan, table)
            counts = own_counts(request, table, self.local.hierarchies, plan.counted, sizes)
            if self.noise == "joint":
                generator = share_generator(randomness(request.seed, stream=self.me))
                primaries = len(self.settings.primaries)
                counts = [c + noise_shares(generator, len(c), request.scale, primaries) for c in counts]
            blob = encrypt_vector(key, np.concatenate(counts) if counts else np.zeros(0, np.int64))
            if plan.joins and self.ring:
                blob = self._ring_join(plan, table, blob)
            elif plan.joins and self.me == permuter_of(self.ctx):
                blob = self._fold_joined(plan, blob)
            if not aggregating:
                send_control(transport, self.aggregator, "s/counts", KeyNotice(sizes=sizes), counts=blob)
        if aggregating:  # a protocol without a helper: this primary adds, it cannot decrypt
            with timer.phase("integrate"):
                blobs = receive_counts(transport, others, sizes) + [blob]
                summed, source = aggregate(key, sizes, blobs, self.noise, request, self.me)
                send_control(transport, self.recipient, "s/sums", Verdict(report={"randomness": source}), sums=summed)
        with timer.phase("decrypt"):
            if self.me == self.recipient:
                notice, parts = receive_control(transport, self.aggregator, "s/sums", Verdict, "noisy sums")
                notice.raise_if_stopped()
                assert secret is not None  # the key holder made it
                addends = len(self.settings.primaries) + (1 if self.noise == "helper" else 0)
                values = decrypt_vector(secret, parts.get("sums", b""), sum(sizes), addends)
                facts = mechanism_facts(self.noise, str(notice.report.get("randomness", "")),
                                        request.seed is not None)
                release = assemble(request, marginal_domains, split_segments(values, sizes), **facts)
                release["protocol"] = {"name": self.settings.protocol, "split": self.settings.distribution,
                                       "primaries": len(self.settings.primaries), "key_holder": self.me,
                                       **who(self.noise, self.aggregator, bool(helpers))}
                if plan.joins:
                    release["protocol"]["joined"] = joined_facts(request, plan.joins, self._permuter(), self.noise,
                                                                 self.aggregator if self.ring else "")
                outcome.report["statistics"] = release
                for party in [*others, *helpers]:
                    send_control(transport, party, "s/done", Verdict())
            else:
                done, _ = receive_control(transport, self.recipient, "s/done", Verdict, "completion notice")
                done.raise_if_stopped()
        outcome.report.update(role_report(self.ctx, self.settings.protocol, "primary", timer, PHASES,
                                          statistics_mode=True))
        return outcome


def receive_counts(transport: Any, senders: list[str], sizes: list[int]) -> list[bytes]:
    """The encrypted count vectors of `senders`, each checked to count tables of the key holder's sizes."""
    blobs = []
    for party in senders:
        sent, parts = receive_control(transport, party, "s/counts", KeyNotice, f"counts of {party!r}")
        if sent.sizes != sizes:
            raise ProtocolError(f"party {party!r} counted tables of other sizes than the key holder")
        blobs.append(parts.get("counts", b""))
    return blobs


class _Helper(HelperRole):
    def __init__(self, ctx: RoleContext, noise: str, joins: bool = False) -> None:
        super().__init__(ctx, ctx.settings.protocol)
        self.noise = noise
        self.joins = joins
        self.request = request_of(ctx)
        self.recipient = self.settings.result_recipient
        if self.recipient not in self.primaries:
            raise ProtocolError(f"result recipient {self.recipient!r} is not a primary party ({self.primaries})")

    def run(self) -> RoleOutcome:
        request, transport, timer = self.request, self.transport, self.timer
        outcome = RoleOutcome()
        with timer.phase("encrypt"):
            notice, parts = receive_control(transport, self.recipient, "s/key", KeyNotice, "counter key")
            notice.raise_if_stopped()
            key = PaillierPublicKey.from_bytes(parts.get("key", b""))
            sizes = list(notice.sizes)
            joins = [JoinPlan.from_json(j) for j in notice.joins]
            if joins and not self.joins:
                raise ProtocolError(f"Protocol {self.settings.protocol}'s statistics mode joins no tables")
            rows = {p: receive_control(transport, p, "s/rows", Verdict, f"rows of {p!r}")[1] for p in senders(joins)}
        with timer.phase("integrate"):
            if joins:
                shares = {p: {k: v for k, v in r.items() if k != "control"} for p, r in rows.items()}
                if self.noise == "helper":  # B: the helper counts the joined rows (and learns those counts)
                    cts = key.encrypt_many([int(c) for v in count_joined(shares, joins) for c in v.tolist()],
                                           workers=1)
                else:  # C: it multiplies encrypted counters and learns no count
                    cts = [c for v in sum_joined(shares, joins, key, senders(joins)[0]) for c in v]
                send_control(transport, permuter_of(self.ctx), "s/joined", KeyNotice(sizes=[j.cells for j in joins]),
                             counts=key.ciphertexts_to_bytes(cts))
            blobs = receive_counts(transport, self.primaries, sizes)
            summed, source = aggregate(key, sizes, blobs, self.noise, request, self.me)
        with timer.phase("decrypt"):
            send_control(transport, self.recipient, "s/sums", Verdict(report={"randomness": source}), sums=summed)
            done, _ = receive_control(transport, self.recipient, "s/done", Verdict, "completion notice")
            done.raise_if_stopped()
        outcome.report.update(role_report(self.ctx, self.settings.protocol, "helper", timer, PHASES,
                                          statistics_mode=True, cells=int(sum(sizes))))
        return outcome


def roles(noise: str, joins: bool = False) -> dict[str, Any]:
    """The ROLES of one protocol's statistics mode: `noise` is "helper" (B) or "joint" (C, A);
    `joins`: a table across several parties' columns of a vertical split is counted on the helper's
    join (B, `joined.py`) instead of refused."""
    if noise not in NOISE_MODES:
        raise ValueError(f"unknown noise mode {noise!r}")

    @guarded
    def primary(ctx: RoleContext) -> RoleOutcome:
        return _Primary(ctx, noise, joins).run()

    @guarded
    def helper(ctx: RoleContext) -> RoleOutcome:
        return _Helper(ctx, noise, joins).run()

    return {"primary": primary, "helper": helper}
