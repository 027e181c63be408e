"""The statistics mode of Protocols A, B and C: noisy counts of the pooled table, summed under encryption.

A run whose options hold `statistics` (`dp.statistics.StatisticsRequest`) releases the total
row count and marginals of the table the primaries hold together, as `fedanon stats` does
for one table, and anonymizes nothing. In a horizontal split every primary counts its own rows
in every cell; in a vertical split each table is counted by the one primary that holds all of
its attributes (a table across two parties' columns is refused: it would need a join), the
total by the key holder, over the persons every party holds (checked by digest).

encrypt    primary    -> key holder   s/cells   (vertical) the tables it counts, their cells, its persons' digest
           key holder -> every party  s/key     its fresh Paillier public key, the segment sizes;
                                                horizontal: to primaries also the cells' digest
                                                (`counts.py`); vertical: who counts each table
           primary    -> aggregator   s/counts  Enc(own counts [+ own noise shares]) per cell
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
from fedanon.dp.marginals import level_domain
from fedanon.protocols.stats.counts import cells_digest, held_marginals, own_counts, persons_digest
from fedanon.protocols.stats.vectors import add_vectors, decrypt_vector, encrypt_vector

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


@dataclass
class CellsNotice(Verdict):
    """A primary's s/cells to the key holder (vertical): the tables it counts, with their cells (hex)
    per attribute, and the digest of its persons."""

    marginals: dict[str, list[list[str]]] = field(default_factory=dict)
    persons: str = ""


@dataclass
class Plan:
    """What a primary knows once the key holder has answered: the key (and, at the key holder, its
    secret half), every segment's size, which segments this party counts, and (key holder) the cells."""

    key: PaillierPublicKey
    secret: PaillierPrivateKey | None
    sizes: list[int]
    counted: list[bool]
    domains: list[list[list[bytes]]]


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
    def __init__(self, ctx: RoleContext, noise: str) -> None:
        super().__init__(ctx)
        self.noise = noise
        self.request = request_of(ctx)
        self.recipient = self.settings.result_recipient
        self.aggregator = aggregator_of(ctx)

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
        holder). The others tell the key holder which tables they count, with those tables' cells (the
        release names them anyway) and a digest of their persons; the key holder checks that every
        table has one counter and every party the same persons, then sends the key and the sizes."""
        request, transport = self.request, self.transport
        tid = self.local.tid_column
        columns = [c for c in self.local.columns if c != tid]
        held = held_marginals(request, columns)
        mine = {i: [level_domain(self.local.hierarchies[a], lv) for a, lv in zip(spec.attributes, spec.levels)]
                for i, (spec, h) in enumerate(zip(request.marginals, held)) if h}
        tids = [] if tid is None else [row[self.local.columns.index(tid)] for row in self.local.rows]
        persons = persons_digest(self.settings.run_id, tids)
        first = 1 if request.total else 0
        if self.me != self.recipient:
            send_control(transport, self.recipient, "s/cells",
                         CellsNotice(marginals={str(i): [[v.hex() for v in d] for d in doms] for i, doms in mine.items()},
                                     persons=persons))
            notice, parts = receive_control(transport, self.recipient, "s/key", KeyNotice, "counter key")
            notice.raise_if_stopped()
            counted = [owner == self.me for owner in notice.owners]
            if len(notice.sizes) != request.queries or len(counted) != request.queries \
                    or any(counted[first + i] != (i in mine) for i in range(len(request.marginals))):
                raise ProtocolError(f"party {self.me!r}: the key holder's plan does not match the tables it holds")
            return Plan(PaillierPublicKey.from_bytes(parts.get("key", b"")), None, list(notice.sizes), counted, [])
        owners: dict[int, list[str]] = {i: [self.me] for i in mine}
        cells: dict[int, list[list[bytes]]] = dict(mine)
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
        for i, spec in enumerate(request.marginals):
            if len(owners.get(i, [])) != 1:
                problems.append(f"--stats-marginal {spec.describe()} is held by "
                                f"{' and '.join(repr(p) for p in owners.get(i, [])) or 'no party'}; it must be "
                                "held by exactly one")
        if problems:
            text = "the statistics run stopped: " + "; ".join(problems)
            raise LocalFailure([LocalProblem(text, text)])
        marginal_domains = [cells[i] for i in range(len(request.marginals))]
        sizes = segment_sizes(request, marginal_domains)
        order = ([self.me] if request.total else []) + [owners[i][0] for i in range(len(request.marginals))]
        secret = generate_paillier_keypair()
        for party in [*others, *helpers]:
            send_control(transport, party, "s/key", KeyNotice(sizes=sizes, owners=order),
                         key=secret.public_key.to_bytes())
        return Plan(secret.public_key, secret, sizes, [o == self.me for o in order], marginal_domains)

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
            counts = own_counts(request, table, self.local.hierarchies, plan.counted, sizes)
            if self.noise == "joint":
                generator = share_generator(randomness(request.seed, stream=self.me))
                primaries = len(self.settings.primaries)
                counts = [c + noise_shares(generator, len(c), request.scale, primaries) for c in counts]
            blob = encrypt_vector(key, np.concatenate(counts) if counts else np.zeros(0, np.int64))
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
    def __init__(self, ctx: RoleContext, noise: str) -> None:
        super().__init__(ctx, ctx.settings.protocol)
        self.noise = noise
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
            blobs = receive_counts(transport, self.primaries, sizes)
        with timer.phase("integrate"):
            summed, source = aggregate(key, sizes, blobs, self.noise, request, self.me)
        with timer.phase("decrypt"):
            send_control(transport, self.recipient, "s/sums", Verdict(report={"randomness": source}), sums=summed)
            done, _ = receive_control(transport, self.recipient, "s/done", Verdict, "completion notice")
            done.raise_if_stopped()
        outcome.report.update(role_report(self.ctx, self.settings.protocol, "helper", timer, PHASES,
                                          statistics_mode=True, cells=int(sum(sizes))))
        return outcome


def roles(noise: str) -> dict[str, Any]:
    """The ROLES of one protocol's statistics mode: `noise` is "helper" (B) or "joint" (C)."""
    if noise not in NOISE_MODES:
        raise ValueError(f"unknown noise mode {noise!r}")

    @guarded
    def primary(ctx: RoleContext) -> RoleOutcome:
        return _Primary(ctx, noise).run()

    @guarded
    def helper(ctx: RoleContext) -> RoleOutcome:
        return _Helper(ctx, noise).run()

    return {"primary": primary, "helper": helper}
