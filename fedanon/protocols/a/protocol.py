"""Protocol A (§4.4.3): commutative encryption around a ring of the data holders, no helper.

The primaries form a ring in the run's party order (right neighbour of P_i is P_{i+1},
the last one's is the first). The *master* anonymizes; it is the right neighbour of the
result recipient, so the decryption chain that starts at the master ends at the
recipient (§4.4.3.1.4). Phases and messages:

encrypt    primary -> master   a/hello        schema facts (never values), local checks
           master  -> primary  a/roster       ok + the agreed columns, or the error that stops the run
           every party draws one commutative key per column (the TID too), hashes its
           values into the group (a secret `GroupDictionary` per column) and encrypts
           its share; right-parallel round robin (R-PRR): every share travels n-1 hops
           to the right, each hop adds its layer and re-permutes rows, dictionaries and
           hierarchy rules                                       a/enc/<hop>
integrate  left-sequential round robin (L-SRR) started by the master's left neighbour:
           each party merges the n-fold encrypted share it holds into what it received
           and passes it left (vertical: sort by the encrypted TID, compare TID digests,
           drop the TID, concatenate columns; horizontal: append, re-permute, merge
           hierarchies dropping duplicate rules)                  a/int
anonymize  master runs the unchanged engine on ciphertext; tells everyone the report  a/anonymized
verify     (option `verified`) master sends the integrated table to every party; each
           anonymizes it independently; all exchange result digests and compare them
           before anything is decrypted                           a/verify-input, a/digest
decrypt    right-sequential round robin (R-SRR) from the master: each party removes its
           layer and re-permutes; the recipient removes the last one  a/dec
           decoding: the recipient looks the hashed elements up in its own dictionaries,
           the rest go round the ring once; each owner sends what it can decode straight
           to the recipient                                       a/decode-ask, a/decoded
           every primary tells the recipient directly how many of its rows the release must hold
           (never via the master); the recipient checks the count before it accepts  a/rows

Only dictionaries are encrypted (§4.5.4): every distinct value of a column -- data and
hierarchy values alike -- is one group element, encrypted once per hop, and the hierarchy
travels as a code matrix into that column's dictionary. Options: `cipher` ("ec" default,
"ph"), `min_levels` ({column: level}: pre-generalization against frequency analysis by
the master, §4.4.3.5), `verified` (bool), `workers` (crypto processes; default all cores).
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedanon.crypto.commutative import CommutativeCipher, GroupDictionary, get_commutative_cipher
from fedanon.crypto.errors import CryptoError
from fedanon.engine.anonymizer import anonymize, materialize, prepare, search_and_apply
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.result import AnonymizationResult, NoSolutionError
from fedanon.engine.settings import keep_engine_private
from fedanon.data.table import EncodedTable
from fedanon.errors import FedanonError, ProtocolError
from fedanon.protocols.dp.release import (bind_sampling_identity, check_config, deal_sampling_key, dp_model,
                                         keep_persons, keep_rows, refuse_unsupported, sampled, search)
from fedanon.protocols.kit.keyshare import roster_bindings
from fedanon.protocols.kit import codec
from fedanon.protocols.kit.api import RoleContext, RoleOutcome
from fedanon.protocols.kit.cellcrypt import SUPPRESSED, random_permutation, verify_suppression
from fedanon.protocols.kit.integration import append_tables, merge_all_hierarchies, merge_hierarchies
from fedanon.protocols.hybrid.join import HYBRID, check_hybrid_schemas, column_groups, held_by, join_groups
from fedanon.protocols.kit.resultcheck import check_result
from fedanon.protocols.kit.roles import (
    DataHolder,
    Hello,
    LocalFailure,
    Roster,
    Verdict,
    guarded,
    mark_shared,
    receive_control,
    role_report,
    send_control,
    shared_error,
    stop_run,
)
from fedanon.protocols.kit.validation import LocalProblem, check_schemas, hello_summary, local_checks, needed_hierarchies

PHASES = ("encrypt", "integrate", "anonymize", "verify", "decrypt")
DOMAIN = b"fedanon/A/v1"
#: Option that makes the master doctor its result (tests only): true publishes a coarser
#: transformation than the optimum (caught by verified mode), "raw" publishes the integrated
#: table un-anonymized (caught by the recipient's result check).
DOCTOR_OPTION = "test_doctor_master"


# ----------------------------------------------------------------------------- options


@dataclass
class Options:
    cipher: type[CommutativeCipher]
    min_levels: dict[str, int]
    verified: bool
    workers: int | None
    doctor_master: str  # "" honest, "coarser" or "raw" (test hook)

    @classmethod
    def parse(cls, options: dict[str, Any]) -> "Options":
        """Every party parses the same options, so a bad one fails everywhere alike."""
        try:
            cipher = get_commutative_cipher(str(options.get("cipher", "ec")).lower())
        except CryptoError as exc:
            raise mark_shared(ProtocolError(f"option cipher: {exc}")) from None
        raw = options.get("min_levels", {}) or {}
        if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                                and v >= 0 for k, v in raw.items()):
            raise mark_shared(ProtocolError("option min_levels must map column names to levels >= 0"))
        workers = options.get("workers")
        if workers is not None and (not isinstance(workers, int) or workers < 0):
            raise mark_shared(ProtocolError("option workers must be a non-negative integer"))
        doctor = options.get(DOCTOR_OPTION, False)
        return cls(cipher, {k: int(v) for k, v in raw.items() if v > 0}, bool(options.get("verified", False)),
                   workers, "raw" if doctor == "raw" else ("coarser" if doctor else ""))


# ----------------------------------------------------------------------------- the share on the wire


@dataclass
class Share:
    """One (partly) encrypted, dictionary-compressed table with its hierarchies.

    `dictionaries[c]` holds group elements: every distinct value of column c, data and
    hierarchy values alike; `codes` and each hierarchy matrix index into it.
    """

    columns: list[str]
    codes: np.ndarray  # (rows, columns) int32
    dictionaries: list[list[bytes]]
    hierarchies: dict[str, np.ndarray] = field(default_factory=dict)  # column -> (rules, height) int32
    tids: list[bytes] | None = None  # vertical: one element per row
    subset: np.ndarray | None = None  # delta-presence research-subset flags, per row
    tid_digest: bytes = b""  # vertical integration: SHA-256 of the sorted TIDs already dropped

    @property
    def n_rows(self) -> int:
        return int(self.codes.shape[0])

    def encode(self) -> bytes:
        parts = {"table": codec.encode_table_parts(self.columns, self.codes, self.dictionaries)}
        for column, matrix in self.hierarchies.items():
            parts[f"h/{column}"] = codec.encode_codes(matrix)
        if self.tids is not None:
            parts["tids"] = b"".join(self.tids)
        if self.subset is not None:
            parts["subset"] = codec.encode_flags(self.subset)
        if self.tid_digest:
            parts["tid_digest"] = self.tid_digest
        return codec.pack_message(parts)

    @classmethod
    def decode(cls, blob: bytes, what: str, element_bytes: int) -> "Share":
        """Parse and check every length and index (a corrupt share never reaches the engine)."""
        parts = codec.unpack_message(blob, what)
        columns, codes, dictionaries = codec.decode_table_parts(codec.require_part(parts, "table", what), what)
        for column, dictionary in zip(columns, dictionaries):
            if any(len(e) != element_bytes for e in dictionary):
                raise ProtocolError(f"corrupt {what}: column {column!r} holds values that are not "
                                    f"{element_bytes}-byte group elements")
        share = cls(columns, codes, dictionaries)
        for name, payload in parts.items():
            if name.startswith("h/"):
                column = name[2:]
                if column not in columns:
                    raise ProtocolError(f"corrupt {what}: hierarchy for unknown column {column!r}")
                matrix = codec.decode_codes(payload, f"{what}, hierarchy of {column!r}",
                                            len(dictionaries[columns.index(column)]))
                if matrix.shape[0] == 0 or matrix.shape[1] == 0:
                    raise ProtocolError(f"corrupt {what}: empty hierarchy for column {column!r}")
                share.hierarchies[column] = matrix
        if "tids" in parts:
            raw = parts["tids"]
            if len(raw) != share.n_rows * element_bytes:
                raise ProtocolError(f"corrupt {what}: {len(raw)} bytes of TIDs for {share.n_rows} rows")
            share.tids = [raw[i:i + element_bytes] for i in range(0, len(raw), element_bytes)]
        if "subset" in parts:
            share.subset = codec.decode_flags(parts["subset"], f"{what}, subset flags")
            if len(share.subset) != share.n_rows:
                raise ProtocolError(f"corrupt {what}: {len(share.subset)} subset flags for {share.n_rows} rows")
        share.tid_digest = parts.get("tid_digest", b"")
        return share

    def table(self, columns: list[str] | None = None) -> EncodedTable:
        """The data as the engine reads it: each dictionary cut down to the values rows use
        (the engine expects every dictionary value of a QI at level 0 of its hierarchy)."""
        codes = np.empty_like(self.codes)
        dictionaries = []
        for c, dictionary in enumerate(self.dictionaries):
            used, codes[:, c] = np.unique(self.codes[:, c], return_inverse=True) if self.n_rows else \
                (np.zeros(0, dtype=np.int64), codes[:, c])
            dictionaries.append([dictionary[i] for i in used.tolist()])
        table = EncodedTable(list(self.columns), codes, dictionaries)
        return table.select(columns) if columns is not None and columns != self.columns else table

    def hierarchy_objects(self) -> dict[str, Hierarchy]:
        """The hierarchies as the engine reads them (rows of group elements)."""
        out = {}
        for column, matrix in self.hierarchies.items():
            dictionary = np.asarray(self.dictionaries[self.columns.index(column)], dtype=object)
            rows = dictionary[matrix].tolist()
            out[column] = Hierarchy(column, rows, source=f"encrypted hierarchy of {column!r}")
        return out


def repermute(share: Share, rows: bool = True) -> Share:
    """Fresh random order of rows (unless `rows=False`), of every dictionary and of hierarchy rules."""
    codes = share.codes
    tids, subset = share.tids, share.subset
    if rows and share.n_rows > 1:
        perm = random_permutation(share.n_rows)
        codes = codes[perm]
        tids = [tids[i] for i in perm.tolist()] if tids is not None else None
        subset = subset[perm] if subset is not None else None
    codes = codes.copy() if codes is share.codes else codes
    dictionaries: list[list[bytes]] = []
    hierarchies: dict[str, np.ndarray] = {}
    for c, (column, dictionary) in enumerate(zip(share.columns, share.dictionaries)):
        shuffle = random_permutation(len(dictionary))
        new_code = np.empty(len(dictionary), dtype=np.int32)
        new_code[shuffle] = np.arange(len(dictionary), dtype=np.int32)
        if len(codes):
            codes[:, c] = new_code[codes[:, c]]
        dictionaries.append([dictionary[i] for i in shuffle.tolist()])
        matrix = share.hierarchies.get(column)
        if matrix is not None:
            hierarchies[column] = new_code[matrix][random_permutation(len(matrix))]
    return Share(list(share.columns), codes, dictionaries, hierarchies, tids, subset, share.tid_digest)


# ----------------------------------------------------------------------------- crypto bookkeeping


def hash_input(run_id: str, column: str, value: str) -> bytes:
    """What is hashed into the group: run and column bound in, so equal values of
    different columns or runs never meet (length-prefixed, unambiguous)."""
    run = run_id.encode("utf-8")
    col = column.encode("utf-8")
    return b"".join((DOMAIN, struct.pack(">I", len(run)), run, struct.pack(">I", len(col)), col,
                     value.encode("utf-8")))


@dataclass
class OpCounter:
    """Counted group operations of one party (the benchmark's analytical-model check)."""

    hashed: int = 0
    encrypted: int = 0
    decrypted: int = 0

    def report(self) -> dict[str, int]:
        return {"hash": self.hashed, "encrypt": self.encrypted, "decrypt": self.decrypted,
                "commutative": self.encrypted + self.decrypted}


class ColumnKeys:
    """This party's commutative key per column (plus the TID's); never leaves the party."""

    def __init__(self, owner: str, cipher: type[CommutativeCipher], columns: list[str], workers: int | None,
                 counter: OpCounter) -> None:
        self.owner = owner
        self.keys = {column: cipher.generate() for column in columns}
        self.workers = workers
        self.counter = counter

    def _key(self, column: str) -> CommutativeCipher:
        try:
            return self.keys[column]
        except KeyError:
            raise ProtocolError(f"a share names column {column!r}, which is not part of this run") from None

    def add_layer(self, share: Share, tid_column: str | None) -> Share:
        """Encrypt every dictionary entry (each distinct value once) and every TID with our keys."""
        dictionaries = []
        for column, dictionary in zip(share.columns, share.dictionaries):
            dictionaries.append(self._key(column).encrypt_many(dictionary, workers=self.workers))
            self.counter.encrypted += len(dictionary)
        tids = share.tids
        if tids is not None:
            if tid_column is None:
                raise ProtocolError("a share carries TIDs in a horizontal run")
            tids = self._key(tid_column).encrypt_many(tids, workers=self.workers)
            self.counter.encrypted += len(tids)
        return Share(share.columns, share.codes, dictionaries, share.hierarchies, tids, share.subset,
                     share.tid_digest)

    def remove_layer(self, table: EncodedTable, suppressible: set[str]) -> EncodedTable:
        """Strip our layer from an output table's dictionaries; the suppression marker passes."""
        dictionaries = []
        for column, dictionary in zip(table.columns, table.dictionaries):
            marker = [i for i, e in enumerate(dictionary) if e == SUPPRESSED]
            if marker and column not in suppressible:
                raise ProtocolError(f"the result has a suppression marker in column {column!r}, which is not a QI")
            elements = [e for e in dictionary if e != SUPPRESSED]
            try:
                plain = iter(self._key(column).decrypt_many(elements, workers=self.workers))
            except CryptoError as exc:
                raise ProtocolError(f"a value of column {column!r} in the result is not a group element "
                                    "(tampered or mixed-up result)") from exc
            self.counter.decrypted += len(elements)
            dictionaries.append([SUPPRESSED if e == SUPPRESSED else next(plain) for e in dictionary])
        return EncodedTable(list(table.columns), table.codes, dictionaries)


def ring_encrypt(transport: Any, left: str, right: str, n: int, keys: ColumnKeys, own: Share, tid: str | None,
                 element_bytes: int, topic: str = "a/enc") -> Share:
    """R-PRR round a ring of `n` parties: add our layer to our share and to each one passing by (rows,
    dictionaries and hierarchy rules re-permuted at every hop); returns the n-fold encrypted share we
    end up holding. A module function so that the statistics mode's join (`stats/ring.py`) runs the
    same ring."""
    share = own
    for hop in range(n):
        if hop > 0:
            share = Share.decode(transport.receive(left, f"{topic}/{hop}"),
                                 f"share at hop {hop} from {left!r}", element_bytes)
        share = repermute(keys.add_layer(share, tid))
        if hop < n - 1:
            transport.send(right, f"{topic}/{hop + 1}", share.encode())
    return share  # the share of our right neighbour, encrypted by every party


def result_digest(result: AnonymizationResult) -> str:
    """Order-independent SHA-256 of a result: transformation, suppression and row multiset."""
    h = hashlib.sha256()
    h.update(json.dumps(result.transformation, sort_keys=True).encode("utf-8"))
    table = result.output
    columns = [np.asarray(d, dtype=object)[table.codes[:, c]].tolist() for c, d in enumerate(table.dictionaries)]
    flags = np.asarray(result.suppressed, dtype=bool).tolist()
    for row in sorted(zip(*columns, flags)) if table.n_rows else []:
        for value in row[:-1]:
            h.update(struct.pack(">I", len(value)) + value)
        h.update(b"\x01" if row[-1] else b"\x00")
    return h.hexdigest()


# ----------------------------------------------------------------------------- the role


@guarded
def run_primary(ctx: RoleContext) -> RoleOutcome:
    """Every data holder runs this; the master and the recipient take their extra steps."""
    return _Party(ctx).run()


class _Party(DataHolder):
    def __init__(self, ctx: RoleContext) -> None:
        refuse_unsupported(ctx)  # a DP release the registry says A cannot make: stop before any data moves
        super().__init__(ctx)
        self.options = Options.parse(ctx.settings.options)
        self.dp = dp_model(ctx.settings.config) is not None
        if self.dp and (self.options.verified or self.options.min_levels):
            # every verifying party would draw its own transformation; pre-generalization would
            # restrict the lattice SafePub's budget and k are derived for
            raise mark_shared(ProtocolError("--dp cannot be combined with --verified or --min-level in Protocol A"))
        self.ring = list(self.settings.primaries)
        n = len(self.ring)
        if n < 2:
            raise mark_shared(ProtocolError(f"Protocol A needs at least two data-holding parties, the run has {n}"))
        if self.settings.helpers:
            raise mark_shared(ProtocolError("Protocol A has no helper party; remove it from the run"))
        self.recipient = self.settings.result_recipient
        if self.recipient not in self.ring:
            raise mark_shared(ProtocolError(f"result recipient {self.recipient!r} is not a primary party"))
        self.n = n
        self.position = self.ring.index(self.me)
        self.right = self.ring[(self.position + 1) % n]
        self.left = self.ring[(self.position - 1) % n]
        self.master = self.ring[(self.ring.index(self.recipient) + 1) % n]
        self.vertical = self.settings.distribution == "vertical"
        self.hybrid = self.settings.distribution == HYBRID  # TIDs kept through integration, joined at the master
        self.hybrid_info: dict[str, Any] = {}
        self.counter = OpCounter()
        self.element_bytes = self.options.cipher.element_bytes
        self.dictionaries: dict[str, GroupDictionary] = {}  # column -> element -> hash input (secret)

    # -- encrypt: hello / roster --------------------------------------------------
    def _min_level_problems(self) -> list[LocalProblem]:
        problems = []
        for column, level in self.options.min_levels.items():
            if column not in self.local.columns:
                continue
            if column not in self.settings.config.quasi_identifiers or column not in self.local.hierarchies:
                msg = f"party {self.me!r}: --min-level names {column!r}, which is not a quasi-identifier with a hierarchy"
                problems.append(LocalProblem(msg, msg))
            elif level >= self.local.hierarchies[column].height:
                msg = (f"party {self.me!r}: --min-level {column}={level} is above the hierarchy's top level "
                       f"{self.local.hierarchies[column].height - 1}")
                problems.append(LocalProblem(msg, msg))
        return problems

    def _hello(self) -> Roster:
        config = self.settings.config
        problems = local_checks(self.me, self.local, config, self.settings.distribution) + self._min_level_problems()
        hello = Hello(**hello_summary(self.local, config), local_errors=[p.public for p in problems])
        if self.dp:
            hello.rows = 0  # a DP run announces no row count: the master learns only the sample's
            if self.vertical:  # to receive the key that draws the same persons at every party
                self._sampling_identity = bind_sampling_identity(self.ctx, hello, "A")
        if self.me != self.master:
            send_control(self.transport, self.master, "a/hello", hello)
            roster, _ = receive_control(self.transport, self.master, "a/roster", Roster, "roster")
        else:
            hellos = {}
            for party in self.ring:
                hellos[party] = hello if party == self.me else \
                    receive_control(self.transport, party, "a/hello", Hello, f"hello of {party!r}")[0]
            roster = self._roster({p: h.summary() for p, h in hellos.items()})
            if self.dp and self.vertical:
                roster.public_keys = {p: h.public_key for p, h in hellos.items()}
                roster.bindings = roster_bindings(hellos)
            for party in self.ring:
                if party != self.me:
                    send_control(self.transport, party, "a/roster", roster)
        if problems:  # our own values are named only here
            roster.raise_if_stopped("details at this party: " + LocalFailure(problems).private)
        roster.raise_if_stopped()
        return roster

    def _roster(self, hellos: dict[str, dict[str, Any]]) -> Roster:
        config = self.settings.config
        try:
            verdict = (check_hybrid_schemas(config, hellos) if self.hybrid
                       else check_schemas(self.settings.distribution, config, hellos))
        except FedanonError as exc:
            return Roster(ok=False, error=f"invalid run configuration: {exc}")
        if verdict.errors:
            return Roster(ok=False, error="run stopped before any data was sent: " + "; ".join(verdict.errors))
        tid = hellos[self.ring[0]]["tid_column"] if self.vertical or self.hybrid else None
        return Roster(columns=verdict.columns, owners=verdict.owners, tid_column=tid,
                      holders=getattr(verdict, "holders", {}))

    def _dp_sample(self, roster: Roster) -> np.ndarray:
        """Horizontal: each of our rows with probability beta, alone; vertical: the persons whose
        TID the shared sampling key selects, the same at every party."""
        config = self.settings.config
        if not self.vertical or self.local.tid_column is None:
            return keep_rows(config, self.me, len(self.local.rows))
        key = deal_sampling_key(self.ctx, self._sampling_identity, roster, "A")
        t = self.local.columns.index(self.local.tid_column)
        return keep_persons(config, key, "A", self.settings.run_id, [row[t] for row in self.local.rows])

    # -- encrypt: own share -------------------------------------------------------
    def _own_columns(self, roster: Roster) -> list[str]:
        if self.hybrid:  # in the roster's order, so that a column group's shares append
            mine = held_by(roster, self.me)
            return [c for c in roster.columns if c in mine]
        if self.vertical:
            return [c for c in roster.columns if roster.owners.get(c) == self.me]
        return list(roster.columns)

    def _generalized(self, column: str, values: list[str]) -> tuple[list[str], list[list[str]] | None]:
        """Data values and hierarchy rules of a column, lifted to its minimum level if one is set."""
        hierarchy = self.local.hierarchies.get(column) if column in needed_hierarchies(self.settings.config) else None
        level = self.options.min_levels.get(column, 0)
        if hierarchy is None:
            return values, None
        rules = [[v.decode("utf-8") for v in row] for row in hierarchy.rows]
        if level:
            lift = {row[0]: row[level] for row in rules}
            values = [lift[v] for v in values]
            rules = [list(r) for r in dict.fromkeys(tuple(row[level:]) for row in rules)]
        return values, rules

    def _own_share(self, roster: Roster) -> Share:
        """Hash our values into the group (remembering them) and dictionary-encode the share."""
        local = self.local
        run_id = self.settings.run_id
        columns = self._own_columns(roster)
        n = len(local.rows)
        codes = np.empty((n, len(columns)), dtype=np.int32)
        dictionaries: list[list[bytes]] = []
        hierarchies: dict[str, np.ndarray] = {}
        for c, column in enumerate(columns):
            j = local.columns.index(column)
            values, rules = self._generalized(column, [row[j] for row in local.rows])
            distinct = list(dict.fromkeys(values))
            if rules is not None:
                distinct = list(dict.fromkeys(distinct + [v for row in rules for v in row]))
            lookup = {v: i for i, v in enumerate(distinct)}
            codes[:, c] = np.fromiter(map(lookup.__getitem__, values), dtype=np.int32, count=n)
            group = self.dictionaries.setdefault(column, GroupDictionary(self.options.cipher))
            dictionaries.append(group.encode([hash_input(run_id, column, v) for v in distinct],
                                             workers=self.options.workers))
            self.counter.hashed += len(distinct)
            if rules is not None:
                hierarchies[column] = np.array([[lookup[v] for v in row] for row in rules], dtype=np.int32)
        tids = None
        tid = roster.tid_column
        if (self.vertical or self.hybrid) and tid is not None:
            t = local.columns.index(tid)
            group = GroupDictionary(self.options.cipher)  # TIDs are never decoded: a throwaway dictionary
            tids = group.encode([hash_input(run_id, tid, row[t]) for row in local.rows], workers=self.options.workers)
            self.counter.hashed += n
        subset = None
        if self.settings.config.needs_subset and local.research_subset is not None:
            subset = np.asarray(local.research_subset, dtype=bool)
        return Share(columns, codes, dictionaries, hierarchies, tids, subset)

    def _ring_encrypt(self, keys: ColumnKeys, own: Share, tid: str | None) -> Share:
        """R-PRR: add our layer to our share and to each one passing by; keep the n-fold one."""
        return ring_encrypt(self.transport, self.left, self.right, self.n, keys, own, tid, self.element_bytes)

    # -- integrate -----------------------------------------------------------------
    def _integrate(self, held: Share) -> Share | None:
        """L-SRR from the master's left neighbour to the master; returns the table at the master."""
        starter = self.ring[(self.ring.index(self.master) - 1) % self.n]
        if self.hybrid:
            return self._integrate_bundle(held, starter)
        if self.vertical:
            held = self._sorted_by_tid(held)
        if self.me == starter:
            merged = held
        else:
            received = Share.decode(self.transport.receive(self.right, "a/int"),
                                    f"integrated share from {self.right!r}", self.element_bytes)
            merged = self._merge(received, held)
        if self.me == self.master:
            return merged
        self.transport.send(self.left, "a/int", merged.encode())
        return None

    def _integrate_bundle(self, held: Share, starter: str) -> Share | None:
        """Hybrid L-SRR: the n-fold encrypted shares travel on unmerged, TIDs kept, in a fresh random
        order at every hop; the master appends each column group and joins the groups (`_join_bundle`)."""
        bundle = [held]
        if self.me != starter:
            parts = codec.unpack_message(self.transport.receive(self.right, "a/int"), f"shares from {self.right!r}")
            bundle += [Share.decode(blob, f"share {name!r} from {self.right!r}", self.element_bytes)
                       for name, blob in sorted(parts.items())]
        bundle = [bundle[i] for i in random_permutation(len(bundle)).tolist()]
        if self.me == self.master:
            return self._join_bundle(bundle)
        self.transport.send(self.left, "a/int", codec.pack_message({f"{i:06d}": s.encode() for i, s in enumerate(bundle)}))
        return None

    def _join_bundle(self, bundle: list[Share]) -> Share:
        """Append the shares of each column group, join the groups on the n-fold encrypted TIDs
        (persons some group lacks are dropped), merge each column's hierarchies."""
        groups: dict[tuple[str, ...], list[str]] = {}
        tables: dict[str, EncodedTable] = {}
        tokens: dict[str, np.ndarray] = {}
        hierarchy_shares: dict[str, list[tuple[str, Hierarchy]]] = {}
        order: dict[tuple[str, ...], list[str]] = {}
        for i, share in enumerate(bundle):
            name = f"share {i}"
            if share.tids is None or len(share.tids) != share.n_rows:
                raise stop_run(self.ctx, "run stopped during integration: a share carries no TIDs", "integration")
            key = tuple(sorted(share.columns))
            groups.setdefault(key, []).append(name)
            columns = order.setdefault(key, list(share.columns))
            tables[name] = share.table(columns)
            digests = b"".join(hashlib.sha256(t).digest() for t in share.tids)  # fixed-width join tokens
            tokens[name] = np.frombuffer(digests, dtype=">u8").reshape(share.n_rows, 4).astype(np.uint64)
            for column, hierarchy in share.hierarchy_objects().items():
                hierarchy_shares.setdefault(column, []).append((name, hierarchy))
        joined = join_groups(list(groups.values()), tables, tokens)
        if joined.duplicates:
            named = {n: list(cols) for cols, names in groups.items() for n in names}
            columns = sorted({tuple(named[d.parties[0]]) for d in joined.duplicates})
            raise stop_run(self.ctx, "run stopped during integration: an identifier occurs twice in the column "
                                     f"group of columns {', '.join(str(list(c)) for c in columns)} (two parties, or "
                                     "one party twice, claim the same person's cells)", "integration")
        merged = merge_all_hierarchies(hierarchy_shares)
        if merged.conflicts or merged.height_mismatch:
            raise stop_run(self.ctx, "run stopped during integration: the hierarchies of a column disagree between "
                                     "the parties (a value has different generalizations, or the heights differ)",
                           "integration")
        table = joined.table
        dictionaries: list[list[bytes]] = []
        matrices: dict[str, np.ndarray] = {}
        for c, column in enumerate(table.columns):
            dictionary = list(table.dictionaries[c])
            lookup = {e: i for i, e in enumerate(dictionary)}
            hierarchy = merged.hierarchies.get(column)
            if hierarchy is not None:  # hierarchy values join the dictionary, as in every A share
                for row in hierarchy.rows:
                    for e in row:
                        if e not in lookup:
                            lookup[e] = len(dictionary)
                            dictionary.append(e)
                matrices[column] = np.array([[lookup[e] for e in row] for row in hierarchy.rows], dtype=np.int32)
            dictionaries.append(dictionary)
        self.hybrid_info = {"persons_per_group": joined.persons_per_group, "persons_dropped": joined.dropped}
        return repermute(Share(list(table.columns), table.codes.astype(np.int32), dictionaries, matrices))

    def _sorted_by_tid(self, share: Share) -> Share:
        """Vertical: rows in the order of the n-fold encrypted TID (the same at every party), TID dropped."""
        if share.tids is None:
            raise ProtocolError("vertical integration: a held share carries no TIDs")
        order = np.argsort(np.array(share.tids, dtype=f"S{self.element_bytes}"), kind="stable")
        digest = hashlib.sha256(b"".join(share.tids[i] for i in order.tolist())).digest()
        subset = share.subset[order] if share.subset is not None else None
        return Share(share.columns, share.codes[order], share.dictionaries, share.hierarchies, None, subset, digest)

    def _merge(self, received: Share, held: Share) -> Share:
        if self.vertical:
            if received.tid_digest != held.tid_digest or received.n_rows != held.n_rows:
                raise stop_run(self.ctx, "run stopped during integration: the parties' TID sets differ "
                                         "(every party must hold the same tuple identifiers)", "integration")
            overlap = set(received.columns) & set(held.columns)
            if overlap:
                raise stop_run(self.ctx, f"run stopped during integration: columns {sorted(overlap)} arrived twice",
                               "integration")
            subset = received.subset if received.subset is not None else held.subset
            return Share(received.columns + held.columns, np.concatenate([received.codes, held.codes], axis=1),
                         received.dictionaries + held.dictionaries, {**received.hierarchies, **held.hierarchies},
                         None, subset, held.tid_digest)
        if received.columns != held.columns:
            raise stop_run(self.ctx, "run stopped during integration: the shares have different columns",
                           "integration")
        table = append_tables([EncodedTable(received.columns, received.codes, received.dictionaries),
                               EncodedTable(held.columns, held.codes, held.dictionaries)])
        hierarchies: dict[str, np.ndarray] = {}
        objects = (received.hierarchy_objects(), held.hierarchy_objects())
        for column in received.hierarchies:
            if column not in held.hierarchies:
                raise stop_run(self.ctx, f"run stopped during integration: only some shares carry a hierarchy "
                                         f"for column {column!r}", "integration")
            merged, conflicts, height_problem = merge_hierarchies([("received", objects[0][column]),
                                                                   ("held", objects[1][column])])
            if height_problem or conflicts or merged is None:
                level = conflicts[0].level if conflicts else "?"
                raise stop_run(self.ctx, f"run stopped during integration: hierarchies of column {column!r} "
                                         f"disagree between the parties (a value at level {level} has different "
                                         "generalizations, or the heights differ)", "integration")
            lookup = {e: i for i, e in enumerate(table.dictionaries[table.columns.index(column)])}
            hierarchies[column] = np.array([[lookup[e] for e in row] for row in merged.rows], dtype=np.int32)
        subset = None
        if received.subset is not None and held.subset is not None:
            subset = np.concatenate([received.subset, held.subset])
        merged_share = Share(list(table.columns), table.codes, table.dictionaries, hierarchies, None, subset)
        return repermute(merged_share)

    # -- anonymize -------------------------------------------------------------------
    def _anonymize(self, integrated: Share, roster: Roster) -> AnonymizationResult:
        config = self.settings.config
        table = integrated.table(list(roster.columns))
        hierarchies = integrated.hierarchy_objects()
        missing = [c for c in needed_hierarchies(config) if c not in hierarchies]
        if missing:
            raise stop_run(self.ctx, f"no party sent a hierarchy for column(s) {missing}", "integration")
        try:
            if self.me == self.master and self.options.doctor_master:
                return self._doctored(table, hierarchies, integrated.subset)
            if self.dp:
                return search(table, hierarchies, config, self.me, "A")
            return keep_engine_private(anonymize(table, hierarchies, config, research_subset=integrated.subset,
                                                 **self.ctx.engine.anonymize_options(table.n_rows)))
        except NoSolutionError as exc:
            raise stop_run(self.ctx, str(exc), "no-solution") from None
        except FedanonError as exc:
            raise stop_run(self.ctx, f"anonymization failed at party {self.me!r}: {self.ctx.engine.redact(str(exc))}",
                           "engine") from None

    def _doctored(self, table: EncodedTable, hierarchies: dict[str, Hierarchy],
                  subset: np.ndarray | None) -> AnonymizationResult:
        """Test hook: a cheating master that publishes a coarser transformation, or the raw table."""
        config = self.settings.config
        prep = prepare(table, hierarchies, config, subset)
        honest = search_and_apply(prep, prep.checker)
        if self.options.doctor_master == "raw":
            honest.transformation = {q: 0 for q in config.quasi_identifiers}
            honest.output, honest.suppressed = table, np.zeros(table.n_rows, dtype=bool)
            honest.suppressed_rows = 0
            return honest
        levels = [honest.transformation[q] for q in config.quasi_identifiers]
        for i, q in enumerate(config.quasi_identifiers):
            if levels[i] + 1 < hierarchies[q].height:
                levels[i] += 1
                break
        output, suppressed, classes = materialize(prep, tuple(levels), prep.checker)
        honest.transformation = dict(zip(config.quasi_identifiers, levels))
        honest.output, honest.suppressed, honest.classes = output, suppressed, classes
        honest.suppressed_rows = int(np.asarray(suppressed).sum())
        return honest

    def _report(self, result: AnonymizationResult, integrated: Share) -> dict[str, Any]:
        report = result.to_report()
        if self.options.min_levels:
            # the engine saw hierarchies that start at the minimum level: report full-hierarchy levels
            report["transformation"] = {q: level + self.options.min_levels.get(q, 0)
                                        for q, level in report["transformation"].items()}
            report["restricted_lattice"] = {"min_levels": dict(self.options.min_levels),
                                            "note": "optimum over the lattice restricted by pre-generalization"}
        report["integration"] = {"rows": integrated.n_rows, "columns": list(integrated.columns),
                                 "hierarchy_rules": {c: int(len(m)) for c, m in integrated.hierarchies.items()},
                                 **self.hybrid_info}
        return report

    # -- verify ----------------------------------------------------------------------
    def _verify(self, integrated: Share | None, roster: Roster,
                result: AnonymizationResult | None) -> dict[str, Any]:
        """Verified mode: everyone anonymizes the encrypted integrated table; digests must agree."""
        if self.me == self.master:
            assert integrated is not None and result is not None
            blob = integrated.encode()
            for party in self.ring:
                if party != self.me:
                    self.transport.send(party, "a/verify-input", blob)
        else:
            integrated = Share.decode(self.transport.receive(self.master, "a/verify-input"),
                                      "integrated table for verification", self.element_bytes)
            result = self._anonymize(integrated, roster)
        digest = result_digest(result)
        for party in self.ring:
            if party != self.me:
                self.transport.send(party, "a/digest", digest.encode("ascii"))
        digests = {self.me: digest}
        for party in self.ring:
            if party != self.me:
                digests[party] = self.transport.receive(party, "a/digest").decode("ascii", errors="replace")
        if len(set(digests.values())) > 1:
            raise shared_error(disagreement(digests, self.master, self.ring), "verification")
        return {"verified_by": list(self.ring), "digest": digest}

    # -- decrypt ---------------------------------------------------------------------
    def _decrypt_chain(self, keys: ColumnKeys, result: AnonymizationResult | None,
                       subset: np.ndarray | None) -> tuple[EncodedTable, np.ndarray] | None:
        """R-SRR from the master to the recipient; returns the hashed output at the recipient."""
        qis = set(self.settings.config.quasi_identifiers)
        if self.me == self.master:
            assert result is not None
            released = np.arange(result.output.n_rows)
            if self.settings.config.needs_subset and subset is not None:
                released = np.flatnonzero(subset)  # only the research subset is released
            table = EncodedTable(list(result.output.columns), result.output.codes[released],
                                 result.output.dictionaries)
            mask = np.asarray(result.suppressed, dtype=bool)[released]
        else:
            parts = codec.unpack_message(self.transport.receive(self.left, "a/dec"), "result in decryption")
            table = codec.decode_table(codec.require_part(parts, "table", "result"), "result table")
            mask = codec.decode_flags(codec.require_part(parts, "suppressed", "result"), "suppression mask")
            if len(mask) != table.n_rows:
                raise ProtocolError(f"suppression mask covers {len(mask)} rows, the result has {table.n_rows}")
        table = keys.remove_layer(table, qis)
        perm = random_permutation(table.n_rows)
        table = EncodedTable(table.columns, table.codes[perm], table.dictionaries)
        mask = mask[perm]
        if self.me == self.recipient:
            return table, mask
        self.transport.send(self.right, "a/dec", codec.pack_message(
            {"table": codec.encode_table(table), "suppressed": codec.encode_flags(mask)}))
        return None

    def _decode(self, table: EncodedTable | None) -> dict[str, dict[bytes, str]]:
        """Map hashed elements back to values: ours here, the rest once round the ring."""
        run_id = self.settings.run_id
        found: dict[str, dict[bytes, str]] = {}
        if self.me == self.recipient:
            assert table is not None
            unknown: dict[str, list[bytes]] = {}
            for column, dictionary in zip(table.columns, table.dictionaries):
                elements = [e for e in dictionary if e != SUPPRESSED]
                mine, rest = self._lookup(column, elements, run_id)
                found[column] = mine
                unknown[column] = rest
            self.transport.send(self.right, "a/decode-ask", _pack_elements(unknown))
            for party in self.ring:
                if party != self.me:
                    decoded = _unpack_values(self.transport.receive(party, "a/decoded"), f"decoded values of {party!r}")
                    for column, pairs in decoded.items():
                        if column not in found:
                            raise ProtocolError(f"party {party!r} decoded values of unknown column {column!r}")
                        found[column].update(pairs)
            return found
        asked = _unpack_elements(self.transport.receive(self.left, "a/decode-ask"), "decoding request")
        answer: dict[str, dict[bytes, str]] = {}
        remaining: dict[str, list[bytes]] = {}
        for column, elements in asked.items():
            answer[column], remaining[column] = self._lookup(column, elements, run_id)
        self.transport.send(self.recipient, "a/decoded", _pack_values(answer))
        if self.right != self.recipient:
            self.transport.send(self.right, "a/decode-ask", _pack_elements(remaining))
        return {}

    def _lookup(self, column: str, elements: list[bytes], run_id: str) -> tuple[dict[bytes, str], list[bytes]]:
        group = self.dictionaries.get(column)
        prefix = len(hash_input(run_id, column, ""))
        known: dict[bytes, str] = {}
        rest: list[bytes] = []
        for e in elements:
            if group is not None and e in group:
                known[e] = group.decode([e])[0][prefix:].decode("utf-8")
            else:
                rest.append(e)
        return known, rest

    def _plaintext(self, table: EncodedTable, mask: np.ndarray,
                   found: dict[str, dict[bytes, str]]) -> EncodedTable:
        """The result in plaintext: the hashed dictionaries replaced by the values they decode to."""
        dictionaries = []
        for column, dictionary in zip(table.columns, table.dictionaries):
            values = []
            for e in dictionary:
                if e == SUPPRESSED:
                    values.append(SUPPRESSED)
                elif e in found[column]:
                    values.append(found[column][e].encode("utf-8"))
                else:
                    raise ProtocolError(f"a value of column {column!r} in the result decodes at no party "
                                        "(tampered result or a party lost its dictionary)")
            dictionaries.append(values)
        plain = EncodedTable(list(table.columns), table.codes, dictionaries)
        verify_suppression(plain, mask, set(self.settings.config.quasi_identifiers))
        return plain

    def _released_rows(self) -> int | None:
        """How many of our rows the release must hold: all, or with a model that releases the research
        subset only (δ-presence, k-map against a population table) our subset (None where we do not
        hold the subset flags)."""
        if not self.settings.config.needs_subset:
            return len(self.local.rows)
        subset = self.local.research_subset
        return None if subset is None else int(np.count_nonzero(np.asarray(subset, dtype=bool)))

    def _count_problems(self, released: int, report: dict[str, Any] | None = None,
                        roster: Roster | None = None) -> list[LocalProblem]:
        """A release that counts: the rows released against the rows each primary announced directly
        (a master that duplicates or drops rows passes the privacy and own-rows checks otherwise)."""
        counts = {self.me: self._released_rows()}
        for party in self.ring:
            if party != self.me:
                blob = self.transport.receive(party, "a/rows")
                try:
                    value = json.loads(blob)
                    counts[party] = None if value is None else int(value)
                except (ValueError, TypeError):
                    raise ProtocolError(f"party {party!r} sent a malformed row count") from None
        known = [c for c in counts.values() if c is not None]
        if not known:
            return []
        if self.hybrid and roster is not None:
            return self._hybrid_count_problems(released, counts, (report or {}).get("integration", {}), roster)
        if self.vertical:  # every party holds every row; the subset holder knows the release's size
            expected = max(known) if self.settings.config.needs_subset else counts[self.me]
        elif len(known) < len(counts):
            return []  # delta-presence with parties that do not hold their flags: nothing to add up
        else:
            expected = sum(known)
        if expected is None or released == expected:
            return []
        each = ", ".join(f"{p}: {c}" for p, c in counts.items())
        text = (f"the master deviated from the protocol: the result holds {released} rows, but the primaries "
                f"announced {expected} ({each}); it was not accepted")
        return [LocalProblem(text, text)]

    def _hybrid_count_problems(self, released: int, counts: dict[str, int | None], integration: dict[str, Any],
                               roster: Roster) -> list[LocalProblem]:
        """Hybrid: every column group's persons, as the master joined them, must be the rows its
        parties announced directly, and the release must hold no more persons than the smallest
        group (which persons the join dropped cannot be checked here; see docs/protocols/hybrid.md)."""
        announced = sorted(sum(int(counts.get(p) or 0) for p in group) for group in column_groups(roster))
        reported = integration.get("persons_per_group")
        problems = []
        if not isinstance(reported, list) or sorted(int(x) for x in reported) != announced:
            problems.append(f"the column groups hold {announced} persons as their parties announced, but the master "
                            f"joined {reported}")
        elif released > min(announced, default=0) or released + int(integration.get("persons_dropped", 0)) \
                < max(announced, default=0):
            problems.append(f"the result holds {released} rows, which the groups' {announced} persons and the "
                            f"{integration.get('persons_dropped')} dropped cannot give")
        if not problems:
            return []
        text = "the master deviated from the protocol: " + "; ".join(problems) + "; it was not accepted"
        return [LocalProblem(text, text)]

    def _accept(self, outcome: RoleOutcome, mask: np.ndarray | None, report: dict[str, Any]) -> None:
        """The recipient checks the decrypted result before anyone finishes; the others wait for its word.

        Same check as Protocol B's recipient (`resultcheck.check_result`: the independent
        verifier on the output, its own rows at the reported transformation). A rejection
        raises `LocalFailure`, which `guarded` turns into a run-wide stop, so every party
        waiting here fails with the public part of the finding.
        """
        if self.me != self.recipient:
            accepted, _ = receive_control(self.transport, self.recipient, "a/accepted", Verdict, "acceptance")
            accepted.raise_if_stopped()
            return
        transformation = report.get("transformation")
        assert outcome.output is not None  # the recipient decrypted it in `_plaintext`
        problems = self._count_problems(outcome.output.n_rows, report, self._agreed)
        # hybrid: our persons the join dropped are rightly absent (at most the dropped count)
        dropped = int(report.get("integration", {}).get("persons_dropped", 0)) if self.hybrid else 0
        problems = problems or check_result(
            self.me, self.local, check_config(self.settings.config), self.settings.distribution, outcome.output,
            None if mask is None else np.asarray(mask, dtype=bool).tolist(),
            transformation if isinstance(transformation, dict) else None, outcome.report, may_be_absent=dropped)
        if problems:
            raise LocalFailure(problems)  # public part only leaves this party
        for party in self.ring:
            if party != self.me:
                send_control(self.transport, party, "a/accepted", Verdict())

    # -- the whole run ---------------------------------------------------------------
    def run(self) -> RoleOutcome:
        timer = self.timer
        outcome = RoleOutcome()
        integrated: Share | None = None
        result: AnonymizationResult | None = None
        extra: dict[str, Any] = {}
        with timer.phase("encrypt"):
            roster = self._hello()
            self._agreed = roster
            if self.dp:  # protocols/dp/release.py: who samples how
                keep = self._dp_sample(roster)
                self.local, outcome.sample = sampled(self.local, keep), np.flatnonzero(keep)
            if self.me != self.recipient:  # straight to the recipient: the master cannot change it
                self.transport.send(self.recipient, "a/rows", json.dumps(self._released_rows()).encode())
            tid = roster.tid_column if self.vertical or self.hybrid else None
            keys = ColumnKeys(self.me, self.options.cipher, list(roster.columns) + ([tid] if tid else []),
                              self.options.workers, self.counter)
            held = self._ring_encrypt(keys, self._own_share(roster), tid)
        with timer.phase("integrate"):
            integrated = self._integrate(held)
            del held
        with timer.phase("anonymize"):
            if self.me == self.master:
                assert integrated is not None
                result = self._anonymize(integrated, roster)
                report = self._report(result, integrated)
                for party in self.ring:
                    if party != self.me:
                        send_control(self.transport, party, "a/anonymized", Verdict(report=report))
            else:
                notice, _ = receive_control(self.transport, self.master, "a/anonymized", Verdict, "report")
                notice.raise_if_stopped()
                report = notice.report
        if self.options.verified:
            with timer.phase("verify"):
                extra["verification"] = self._verify(integrated, roster, result)
        with timer.phase("decrypt"):
            subset = integrated.subset if integrated is not None else None
            hashed = self._decrypt_chain(keys, result, subset)
            found = self._decode(hashed[0] if hashed else None)
            if hashed is not None:
                outcome.output = self._plaintext(hashed[0], hashed[1], found)
            self._accept(outcome, hashed[1] if hashed is not None else None, report)
        outcome.result = result if self.me == self.master else None
        outcome.report.update(report)
        outcome.report.update(role_report(
            self.ctx, "A", "primary", timer, PHASES, master=self.master, is_master=self.me == self.master,
            ring=list(self.ring), cipher=self.options.cipher.name, operations=self.counter.report(),
            verified=self.options.verified, **extra))
        return outcome


def disagreement(digests: dict[str, str], master: str, ring: list[str]) -> str:
    """The public message of a failed verification: which party disagrees with whom."""
    counts = Counter(digests.values())
    top, top_count = counts.most_common(1)[0]
    if list(counts.values()).count(top_count) > 1:  # a tie: no majority to side with
        odd = sorted(digests, key=ring.index)
    else:
        odd = [p for p in ring if digests[p] != top]
    named = ", ".join(f"party {p!r}" + (" (the master)" if p == master else "") for p in odd)
    return (f"verified mode: the anonymized results differ; disagreeing: {named}. Nothing was decrypted; "
            "the run is stopped at every party")


def _pack_elements(columns: dict[str, list[bytes]]) -> bytes:
    return codec.encode_table_parts(list(columns), np.zeros((0, len(columns)), np.int32), list(columns.values()))


def _unpack_elements(blob: bytes, what: str) -> dict[str, list[bytes]]:
    names, _codes, dictionaries = codec.decode_table_parts(blob, what)
    return dict(zip(names, dictionaries))


def _pack_values(columns: dict[str, dict[bytes, str]]) -> bytes:
    names = [f"{prefix}{c}" for c in columns for prefix in ("e:", "v:")]
    dictionaries = []
    for pairs in columns.values():
        dictionaries.append(list(pairs))
        dictionaries.append([v.encode("utf-8") for v in pairs.values()])
    return codec.encode_table_parts(names, np.zeros((0, len(names)), np.int32), dictionaries)


def _unpack_values(blob: bytes, what: str) -> dict[str, dict[bytes, str]]:
    names, _codes, dictionaries = codec.decode_table_parts(blob, what)
    out: dict[str, dict[bytes, str]] = {}
    for i in range(0, len(names) - 1, 2):
        if not (names[i].startswith("e:") and names[i + 1] == "v:" + names[i][2:]):
            raise ProtocolError(f"corrupt {what}: unexpected part names {names[i]!r}, {names[i + 1]!r}")
        elements, values = dictionaries[i], dictionaries[i + 1]
        if len(elements) != len(values):
            raise ProtocolError(f"corrupt {what}: {len(elements)} elements but {len(values)} values")
        try:
            out[names[i][2:]] = {e: v.decode("utf-8") for e, v in zip(elements, values)}
        except UnicodeDecodeError:
            raise ProtocolError(f"corrupt {what}: a value is not UTF-8") from None
    if len(names) % 2:
        raise ProtocolError(f"corrupt {what}: odd number of parts")
    return out


ROLES = {"primary": run_primary}
