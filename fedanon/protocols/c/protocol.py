"""Protocol C (§4.4.5): Protocol B's star plus pseudotuples and encrypted row counters.

The helper integrates and searches as in B, but every primary has padded its share with
pseudotuples (`pseudotuples.py`) and every row carries a counter -- 1 real, 0 fake --
encrypted under a key only the *key holder* (the result recipient) can open. The helper
therefore never learns a true class size; the key holder learns class sizes (and, for
the distribution-based models, per-class sensitive histograms / subset counts) of each
tested node in a permuted order, never a cell. See `counted_checks.py` for the check.

encrypt    primary    -> helper     c/hello          schema facts, X25519 key (+ binding); key holder: counter public key
                                                     (+ screening key: `screen_counters_wanted`), each signed
           helper     -> primary    c/roster         ok + everyone's keys + the counter key, or why the run stops
           leader     -> helper     c/keys-for/P     column keys sealed for P (relayed as c/keys)
           primary    -> helper     c/data           encrypted, padded, permuted share + hierarchies + TID tokens
                                                     + encrypted counters (horizontal: every party; vertical:
                                                     each primary the real-row counters of the TIDs
                                                     `counter_owner` deals it, the subset holder's subset counters;
                                                     with a screening key the same flags once more under it)
integrate  helper     -> primary    c/integrated     ok (failures stop the run everywhere)
anonymize  helper     -> key holder c/setup          encrypted totals + sensitive hierarchy structure
           key holder -> helper     c/facts          suppression limit, monotonicity flags, implied k
           helper     -> key holder c/check          per node: permuted, packed encrypted class sums (DONE at the end)
           key holder -> helper     c/answer         anonymous / strict / implied-k, loss, bound
           (a DP run, instead of c/facts .. c/answer: c/dp-step and c/dp-sums, one round trip per step
           of SafePub's walk, the key holder scoring and drawing -- dp_release.py)
decrypt    helper     -> key holder c/result         generalized table with pseudotuples, re-permuted, + its counters
           helper     -> primary    c/tally-request  the transformation
           primary    -> key holder c/tally          DIRECT (not via the helper): its real row count and multiset
                                                     digest (release_tally.py); the key holder checks the rows it
                                                     keeps as real against them before decrypting a cell
           key holder -> helper     c/accepted       after checking the decrypted result (privacy model, own rows:
                                                     resultcheck.py); a rejection stops the run everywhere
           helper     -> others     c/done           the report (no data)

The key holder decrypts the row counters, drops the pseudotuples, suppresses the classes
that fail on the true rows (the same rule the engine applies), releases the research
subset (delta-presence) and decrypts the cells. Options: `pseudotuples` (share of real
rows, default 0.25), `counters` ("paillier" default, or "elgamal").
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

import numpy as np

from fedanon.crypto.counters import (
    COUNTER_SCHEMES,
    DEFAULT_COUNTER_SCHEME,
    CounterPrivateKey,
    CounterPublicKey,
    counter_public_key_from_bytes,
    generate_counter_key,
)
from fedanon.crypto.deterministic import generate_key
from fedanon.crypto.keyagreement import sign_public_key, verify_public_key
from fedanon.crypto.parallel import ChunkProgress
from fedanon.stats.keys import group_keys
from fedanon.engine.anonymizer import generalize, prepare_structure, search
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.result import NoSolutionError
from fedanon.data.table import EncodedTable
from fedanon.errors import FedanonError, ProtocolError
from fedanon.protocols.dp.release import check_config, refuse_unsupported
from fedanon.protocols.kit import codec
from fedanon.protocols.kit.api import LocalData, RoleContext, RoleOutcome
from fedanon.protocols.kit.cellcrypt import (
    SUPPRESSED,
    ColumnCiphers,
    encode_share,
    random_permutation,
    token_keys,
    utf8_dictionary,
)
from fedanon.protocols.c.counted_checks import (
    SCREEN_SCHEME,
    CountJudge,
    EncryptedCountChecker,
    JudgeFacts,
    RowCounters,
    check_supported,
    screen_counters_wanted,
)
from fedanon.protocols.kit.integration import append_tables, check_tids, join_on_tid, merge_all_hierarchies
from fedanon.protocols.hybrid.join import (
    HYBRID,
    check_grouped_tallies,
    check_hybrid_schemas,
    column_groups,
    group_pseudotuples,
    held_by,
    join_groups,
    joined_flags,
    my_group,
)
from fedanon.protocols.kit.keyshare import (
    KeySharingPrimary,
    bind_hello,
    keys_context,
    receive_bundle,
    roster_bindings,
    send_bundles,
    verified_publics,
)
from fedanon.protocols.kit.progress import ProgressTicker, receive_progressing
from fedanon.protocols.c.dp_release import (
    ALGORITHM as DP_ALGORITHM,
    STEP,
    SUMS,
    checked_config,
    is_dp,
    judge_config,
    key_holder_walk,
    sample_share,
    serve_walk,
)
from fedanon.protocols.c.class_means import class_bounds, class_means, encode_values, mean_columns
from fedanon.protocols.c.pseudotuples import fake_tid, pseudotuple_count, pseudotuple_share, resample_rows
from fedanon.protocols.kit.release_tally import Tally, check_tallies, own_tally, shared_key_column, tally_key
from fedanon.protocols.kit.resultcheck import check_result
from fedanon.protocols.kit.roles import (
    Hello,
    HelperRole,
    LocalFailure,
    Roster,
    Verdict,
    guarded,
    mark_shared,
    open_control,
    receive_control,
    role_report,
    send_control,
    shared_error,
    stop_run,
)
from fedanon.protocols.kit.validation import LocalProblem, check_schemas, hello_summary, local_checks, needed_hierarchies

PROTOCOL = "C"
PHASES = ("encrypt", "integrate", "anonymize", "decrypt")
#: the last c/check message: the search is over
DONE = codec.pack_message({"control": b'{"done": true}'})
#: Counters encrypted per chunk; a progress marker may follow each chunk (Paillier: ~5 CPU-s).
COUNTER_CHUNK = 2048
#: slot bound for the final row counters (0/1): 2-bit slots, so a counter of 2 or 3 is caught
_ROW_COUNTER_BOUND = 3


def counter_scheme(options: dict[str, Any]) -> str:
    scheme = str(options.get("counters", DEFAULT_COUNTER_SCHEME)).lower()
    if scheme not in COUNTER_SCHEMES:
        raise ProtocolError(f"option counters must be one of {list(COUNTER_SCHEMES)}, got {scheme!r}")
    return scheme


def _counter_key_context(run_id: str) -> bytes:
    return b"fedanon/C/v1/counter-key/" + run_id.encode("utf-8")


def _screen_key_context(run_id: str) -> bytes:
    return b"fedanon/C/v1/screen-key/" + run_id.encode("utf-8")


#: The key holder's keys that travel in its hello and the roster, each with its signature's context.
_KEY_HOLDER_KEYS = {"counter_key": _counter_key_context, "screen_key": _screen_key_context}


def wants_screen_counters(settings: Any) -> bool:
    """`screen_counters_wanted` for a run's settings (not for hybrid splits or DP releases, which
    keep their screening, if any, under the counter key)."""
    return (settings.distribution in ("horizontal", "vertical") and not is_dp(settings.config)
            and screen_counters_wanted(settings.config, counter_scheme(settings.options)))


def counter_owner(tokens: bytes, rows: int, primaries: int) -> np.ndarray:
    """Vertical split: which primary (index) encrypts the real-row counter of each row.

    Every primary holds every TID (pseudotuples' TIDs derive from the shared TID key, so
    each knows which are fake) and the same join token per TID, so they and the helper
    agree on this deal without a message: the token's first byte modulo the number of
    primaries. It spreads the counter encryption, which the leader alone did before.
    """
    first = np.frombuffer(tokens, dtype=np.uint8).reshape(rows, -1)[:, 0] if rows else np.zeros(0, np.uint8)
    return first.astype(np.int64) % primaries


def encrypt_in_chunks(key: CounterPublicKey | CounterPrivateKey, bits: list[bool], ticker: ProgressTicker) -> bytes:
    """Row counters, encrypted in chunks so that the waiting helper hears of the progress.

    Every chunk goes to the crypto pool at once (no core waits at a chunk's end for the next
    one to be submitted); a marker may follow each chunk as its results arrive, in order.
    The key holder passes its private key: with Paillier it encrypts with the CRT (≈ 1.6x cheaper).
    """
    return b"".join(key.encrypt_counters(bits, progress=ChunkProgress(ticker.tick, COUNTER_CHUNK)))


def _split_counters(blob: bytes, rows: int, what: str) -> list[bytes]:
    if rows == 0 and not blob:
        return []
    if rows == 0 or len(blob) % rows:
        raise ProtocolError(f"{what}: {len(blob)} bytes do not split into {rows} counters")
    w = len(blob) // rows
    return [blob[i:i + w] for i in range(0, len(blob), w)]


# ----------------------------------------------------------------------------- primary


@guarded
def run_primary(ctx: RoleContext) -> RoleOutcome:
    """A data holder: pad with pseudotuples, encrypt, send; the key holder also judges and decrypts."""
    return _Primary(ctx).run()


class _Primary(KeySharingPrimary):
    def __init__(self, ctx: RoleContext) -> None:
        refuse_unsupported(ctx)  # a DP release the registry says C cannot make: stop before any data moves
        super().__init__(ctx, PROTOCOL)
        self.key_holder = self.settings.result_recipient
        self.hybrid = self.settings.distribution == HYBRID
        self.vertical = self.settings.distribution == "vertical" or self.hybrid  # joined on the TID
        self.counter_key: CounterPrivateKey | None = None
        self.screen_key: CounterPrivateKey | None = None  # key holder: the screening counters' key
        self._joined: np.ndarray | None = None  # hybrid: which of our sent rows are in the join
        self.dp_report: dict[str, Any] | None = None  # key holder of a DP run: the report's `dp` entry

    # -- encrypt -----------------------------------------------------------------------
    def _hello(self) -> tuple[Roster, CounterPublicKey, CounterPublicKey | None]:
        config = self.settings.config
        problems = local_checks(self.me, self.local, config, self.settings.distribution)
        hello = Hello(**hello_summary(self.local, config), local_errors=[p.public for p in problems])
        if is_dp(config):
            hello.rows = 0  # a DP run announces no row count: the helper learns only the sample's
        bind_hello(hello, self.identity, self.tls, PROTOCOL, self.settings.run_id)
        parts: dict[str, bytes] = {}
        screening = wants_screen_counters(self.settings)
        if self.me == self.key_holder:
            self.counter_key = generate_counter_key(counter_scheme(self.settings.options))
            parts["counter_key"] = self.counter_key.public_key.to_bytes()
            if screening:
                self.screen_key = generate_counter_key(SCREEN_SCHEME)
                parts["screen_key"] = self.screen_key.public_key.to_bytes()
            if self.tls is not None:  # so nobody accepts a key the helper swapped in
                for name in [n for n in _KEY_HOLDER_KEYS if n in parts]:
                    parts[f"{name}_signature"] = sign_public_key(self.tls[1], parts[name],
                                                                 _KEY_HOLDER_KEYS[name](self.settings.run_id))
        send_control(self.transport, self.helper, "c/hello", hello, **parts)
        roster, rparts = receive_control(self.transport, self.helper, "c/roster", Roster, "roster")
        if problems:
            roster.raise_if_stopped("details at this party: " + LocalFailure(problems).private)
            raise mark_shared(ProtocolError(LocalFailure(problems).private))
        roster.raise_if_stopped()
        blob = self._key_holder_key(roster, rparts, "counter_key", self.counter_key)
        screen = self._key_holder_key(roster, rparts, "screen_key", self.screen_key) if screening else None
        return roster, counter_public_key_from_bytes(blob), None if screen is None else counter_public_key_from_bytes(screen)

    def _key_holder_key(self, roster: Roster, rparts: dict[str, bytes], name: str,
                        own: CounterPrivateKey | None) -> bytes:
        """The key holder's public key `name` from the roster, checked against its signature (made
        with its TLS key), so that no party encrypts under a key the helper swapped in."""
        blob = codec.require_part(rparts, name, "roster")
        label = name.replace("_", " ")
        if self.tls is not None and self.me != self.key_holder:
            binding = roster.bindings.get(self.key_holder)
            if not binding:
                raise ProtocolError(f"key holder {self.key_holder!r} did not bind its {label}")
            verify_public_key(binding["certificate"].encode("ascii"), self.tls[2], self.key_holder, blob,
                              codec.require_part(rparts, f"{name}_signature", "roster"),
                              _KEY_HOLDER_KEYS[name](self.settings.run_id))
        if own is not None and blob != own.public_key.to_bytes():
            raise ProtocolError(f"the roster carries a {label} that is not the key holder's")
        return blob

    def _agree_keys(self, roster: Roster) -> dict[str, bytes]:
        publics = verified_publics(self.me, roster, self.tls, PROTOCOL, self.settings.run_id)
        context = keys_context(PROTOCOL, self.settings.run_id)
        if self.me != self.leader:
            return receive_bundle(self.identity, self.transport, self.helper, self.leader, publics, "c/keys", context)
        tid = roster.tid_column if self.vertical else None
        keys = {c: generate_key() for c in roster.columns}
        if tid:
            keys[tid] = generate_key()
        bundles = {}
        for party in self.settings.primaries:
            if party == self.me:
                continue
            wanted = set(keys)
            if self.vertical and party != self.key_holder:  # an owner needs only its columns and the TID
                wanted = {tid} | held_by(roster, party)
            bundles[party] = {c: k for c, k in keys.items() if c in wanted}
        send_bundles(self.identity, self.transport, self.helper, publics, bundles, "c/keys-for", context)
        return keys

    def _share(self, roster: Roster, keys: dict[str, bytes], counter_key: CounterPublicKey,
               screen_key: CounterPublicKey | None) -> bytes:
        """Pad with pseudotuples, permute, encrypt cells, hierarchies, TIDs and counters."""
        config = self.settings.config
        local = self.local
        ciphers = ColumnCiphers(self.settings.run_id, keys)
        tid = local.tid_column if self.vertical else None
        columns = [c for c in local.columns if c != tid]
        means = mean_columns(self.settings.options)
        if not self.vertical:
            # a column released as its class mean travels under the counter key only (class_means.py)
            columns = [c for c in roster.columns if c not in means]
        fake_ids = range(pseudotuple_count(len(local.rows), pseudotuple_share(self.settings.options)))
        if self.hybrid:  # one run-wide set of fake TIDs, dealt over the parties of each column group
            columns = [c for c in roster.columns if c in columns]  # a group's parties append: one order
            _, group = my_group(roster, self.me)
            fake_ids = range(group.index(self.me), int(roster.report.get("pseudotuples", 0)), len(group))
        fixed = {local.columns.index(tid)} if tid else set()
        fakes = resample_rows(local.rows, len(fake_ids), fixed)
        if tid:
            t = local.columns.index(tid)
            for row, i in zip(fakes, fake_ids):
                row[t] = fake_tid(keys[tid], i)
        rows = list(local.rows) + fakes
        real = np.r_[np.ones(len(local.rows), bool), np.zeros(len(fakes), bool)]
        perm = random_permutation(len(rows))
        table = encode_share(columns, rows, [local.columns.index(c) for c in columns], perm)
        self._order = perm  # sent row i is our row perm[i] (>= our row count: a pseudotuple)
        self._sent = (table, real[perm])  # plaintext in the order sent, real-row flags: for the release tally
        parts: dict[str, bytes] = {"table": codec.encode_table(ciphers.encrypt_table(table))}
        if tid:
            t = local.columns.index(tid)
            tokens = np.frombuffer(ciphers.tid_tokens(tid, [row[t] for row in rows]), dtype=np.uint8)
            parts["tids"] = tokens.reshape(len(rows), -1)[perm].tobytes()
        for column in needed_hierarchies(config):
            if column in columns:  # the full agreed hierarchy covers every pseudotuple value
                h = local.hierarchies[column]
                shuffled = [h.rows[i] for i in random_permutation(len(h.rows)).tolist()]
                parts[f"h/{column}"] = codec.encode_hierarchy(
                    ciphers.encrypt_hierarchy(Hierarchy(column, shuffled, h.source), column))
        ticker = ProgressTicker(self.ctx, [self.helper], "c/data")  # the helper waits for this share
        encryptor = self.counter_key if self.counter_key is not None else counter_key  # key holder: CRT
        flags = real[perm]
        if self.vertical:  # our deal of the TIDs, in our permuted row order (hybrid: dealt over the column groups)
            if self.hybrid:
                mine = counter_owner(parts["tids"], len(rows), len(column_groups(roster))) == \
                    my_group(roster, self.me)[0]
            else:
                mine = counter_owner(parts["tids"], len(rows), len(self.settings.primaries)) == \
                    self.settings.primaries.index(self.me)
            flags = flags[mine]
        parts["counters/real"] = encrypt_in_chunks(encryptor, flags.tolist(), ticker)
        if screen_key is not None:  # the same flags under the screening key (key holder: with its secret)
            parts["counters/screen"] = encrypt_in_chunks(self.screen_key or screen_key, flags.tolist(), ticker)
        for name in means:
            at = local.columns.index(name)
            encoded = encode_values([row[at] for row in rows], real, name)
            parts[f"values/{name}"] = b"".join(encryptor.encrypt_values(
                [encoded[i] for i in perm.tolist()], progress=ChunkProgress(ticker.tick, COUNTER_CHUNK)))
        if config.needs_subset and local.research_subset is not None:
            flags = np.r_[np.asarray(local.research_subset, dtype=bool), np.zeros(len(fakes), bool)]
            parts["counters/subset"] = encrypt_in_chunks(encryptor, (flags & real)[perm].tolist(), ticker)
        return codec.pack_message(parts)

    # -- key holder: judge, then filter and decrypt -----------------------------------------
    def _judge(self) -> CountJudge:
        assert self.counter_key is not None
        config = self.settings.config
        judge = CountJudge(self.counter_key, judge_config(config) if is_dp(config) else config,
                           receive_progressing(self.ctx, self.helper, "c/setup", "anonymize"), workers=None,
                           screen_key=self.screen_key)
        if is_dp(config):  # the key holder scores and draws (dp_release.py); the helper needs none of the
            # search facts (the limit, without a limit, would be the sample's size)
            _, self.dp_report, _ = key_holder_walk(
                self.counter_key, config, self.me, PROTOCOL, judge.heights, judge.n_rows,
                lambda blob: self.transport.send(self.helper, STEP, blob),
                lambda: receive_progressing(self.ctx, self.helper, SUMS, "anonymize"))
            return judge
        self.transport.send(self.helper, "c/facts", json.dumps(asdict(judge.facts())).encode())
        while True:
            request = receive_progressing(self.ctx, self.helper, "c/check", "anonymize")
            if request == DONE:
                return judge
            self.transport.send(self.helper, "c/answer", judge.answer(request))

    def _final(self, judge: CountJudge, keys: dict[str, bytes]) -> tuple[EncodedTable, dict[str, Any]]:
        assert self.counter_key is not None
        notice, parts = open_control(receive_progressing(self.ctx, self.helper, "c/result", "decrypt"),
                                     Verdict, "result")
        notice.raise_if_stopped()
        table = codec.decode_table(codec.require_part(parts, "table", "result"), "result table")
        n = table.n_rows
        real = np.asarray(self.counter_key.decrypt_class_counts(
            codec.require_part(parts, "counters/real", "result"), n, workers=None), dtype=np.int64)
        if ((real != 0) & (real != 1)).any():
            raise ProtocolError("a row counter of the result is not 0 or 1")
        keep = real == 1
        # realness authenticated: the rows kept must be every primary's real rows, each once
        self._check_tallies(keys, table, keep, notice.report)
        subset = None
        if "counters/subset" in parts:
            subset = np.asarray(self.counter_key.decrypt_class_counts(parts["counters/subset"], n, workers=None),
                                dtype=np.int64)[keep] == 1
        qis = list(self.settings.config.quasi_identifiers)
        qi_index = [table.column_index(q) for q in qis]
        codes = table.codes[keep].copy()
        sensitive = {a: codes[:, table.column_index(a)].astype(np.int64) for a in judge.sensitive}
        failing, kept_classes = judge.failing_rows(codes[:, qi_index], sensitive, subset)
        dictionaries = [list(d) for d in table.dictionaries]
        if failing.any():
            for ci in qi_index:
                if SUPPRESSED not in dictionaries[ci]:
                    dictionaries[ci].append(SUPPRESSED)
                codes[failing, ci] = dictionaries[ci].index(SUPPRESSED)
        released = subset if subset is not None and self.settings.config.needs_subset else None
        if released is not None:
            codes = codes[released]
        out = EncodedTable(list(table.columns), codes, dictionaries)
        ciphers = ColumnCiphers(self.settings.run_id, keys)
        plain = EncodedTable(list(out.columns), out.codes, [
            utf8_dictionary(column, ciphers.decrypt_dictionary(column, dictionary, allow_suppressed=column in qis))
            for column, dictionary in zip(out.columns, out.dictionaries)])
        facts = {**notice.report, "suppressed_rows": int(failing.sum()), "classes": kept_classes,
                 "rows_released": int(out.n_rows),
                 "pseudotuples_dropped": int(n - keep.sum()), "release_tally_s": self.tally_s}
        self._accept(plain, failing if released is None else failing[released], notice.report, facts)
        means = mean_columns(self.settings.options)
        if means:  # the mean columns join the table from the decrypted class sums
            columns, rows = self._class_means(parts, n, keep, failing, list(plain.columns), plain.text_rows(), means)
            plain = EncodedTable.from_rows(columns, rows)
        return plain, facts

    def _class_means(self, parts: dict[str, bytes], n: int, keep: np.ndarray, failing: np.ndarray,
                     columns: list[str], rows: list[list[str]], means: list[str]) -> tuple[list[str], list[list[str]]]:
        """The mean columns from the helper's encrypted class sums, in the roster's column order."""
        assert self.counter_key is not None
        classes = np.frombuffer(codec.require_part(parts, "classes", "result"), dtype=np.int32)
        if classes.size != n or (n and classes.min() < 0):
            raise ProtocolError(f"the result's class numbers do not match its {n} rows")
        g = int(classes.max()) + 1 if n else 0
        texts = {}
        for name in means:
            sums = self.counter_key.decrypt_class_counts(codec.require_part(parts, f"sums/{name}", "result"), g,
                                                         workers=None)
            texts[name] = class_means(sums, classes[keep].astype(np.int64), ~failing)
        order = [c for c in self._roster.columns if c in columns or c in texts]
        merged = []
        for i, row in enumerate(rows):
            cells = dict(zip(columns, row))
            merged.append([cells[c] if c in cells else texts[c][i] for c in order])
        return order, merged

    def _tally(self, keys: dict[str, bytes], request: Verdict, parts: dict[str, bytes] | None = None) -> Tally:
        """Our real rows at the helper's transformation, as the release must hold them (`release_tally`)."""
        request.raise_if_stopped()
        transformation = request.report.get("transformation")
        if not isinstance(transformation, dict):
            raise ProtocolError("the helper's tally request names no transformation")
        table, real = self._sent
        columns = list(table.columns)
        if self.hybrid:  # our columns; only our rows the join kept (persons some group lacks are dropped)
            mine = held_by(self._roster, self.me)
            columns = [c for c in columns if c in mine]
            joined = codec.decode_flags(codec.require_part(parts or {}, "joined", "tally request"), "joined flags")
            if len(joined) != len(real):
                raise ProtocolError("the helper's joined flags do not match this party's row count")
            self._joined = joined
            real = real & joined
        elif self.vertical:
            columns = [c for c in columns if self._roster.owners.get(c) == self.me]
        return own_tally(self.me, self._tally_key, table, columns, real, None, transformation,
                         self.local.hierarchies, ColumnCiphers(self.settings.run_id, keys))

    def _check_tallies(self, keys: dict[str, bytes], table: EncodedTable, keep: np.ndarray,
                       report: dict[str, Any]) -> None:
        """Key holder: the rows whose counters decrypt to 1 against every primary's tally, each
        received straight from that primary. A helper holds the counter public key and can
        encrypt a 1 for a pseudotuple; it cannot make the count and the keyed digest agree."""
        request, rparts = receive_control(self.transport, self.helper, "c/tally-request", Verdict, "tally request")
        started = time.perf_counter()
        tallies = {self.me: self._tally(keys, request, rparts)}
        own_s = time.perf_counter() - started
        for party in self.settings.primaries:
            if party != self.me:
                tallies[party] = Tally.from_json(self.transport.receive(party, "c/tally"), party)
        started = time.perf_counter()
        transformation = report.get("transformation")
        if self.hybrid:
            problems = check_grouped_tallies(tallies, self._tally_key, table,
                                             transformation if isinstance(transformation, dict) else {},
                                             column_groups(self._roster), keep)
        else:
            problems = check_tallies(tallies, self._tally_key, table, keep,
                                     transformation if isinstance(transformation, dict) else {}, self.vertical)
        # this safeguard's own cost (not the wait for the others' tallies), for the benchmarks
        self.tally_s = round(own_s + time.perf_counter() - started, 6)
        if problems:
            text = "the helper deviated from the protocol: " + "; ".join(problems) + "; it was not accepted"
            raise LocalFailure([LocalProblem(text, text)])

    def _accept(self, output: EncodedTable, suppressed: np.ndarray,
                report: dict[str, Any], timings: dict[str, Any]) -> None:
        """Check the decrypted result as B's and A's recipients do (`resultcheck.check_result`), then tell the helper.

        The check's wall time lands in `timings` as `result_check_s` (the key holder's report), so
        benchmarks tell this safeguard's cost from the protocol's own, as for A and B.

        A rejection raises `LocalFailure` (only its public part leaves this party); `guarded`
        turns it into a run-wide stop, and the helper sends `c/done` only after `c/accepted`.
        """
        transformation = report.get("transformation")
        local = self.local
        if self.hybrid and self._joined is not None:  # our persons the join dropped are rightly absent
            order = self._order
            n = len(local.rows)
            keep = np.zeros(n, dtype=bool)
            sent = order[self._joined & (order < n)]
            keep[sent] = True
            local = LocalData(list(local.columns), [r for r, k in zip(local.rows, keep.tolist()) if k],
                              local.hierarchies, local.tid_column, None)
        problems = check_result(self.me, local, check_config(self.settings.config), self.settings.distribution, output,
                                np.asarray(suppressed, dtype=bool).tolist(),
                                transformation if isinstance(transformation, dict) else None, timings)
        if problems:
            raise LocalFailure(problems)
        send_control(self.transport, self.helper, "c/accepted", Verdict())

    def run(self) -> RoleOutcome:
        timer = self.timer
        outcome = RoleOutcome()
        with timer.phase("encrypt"):
            roster, counter_key, screen_key = self._hello()
            keys = self._agree_keys(roster)
            self._roster = roster
            shared = shared_key_column(list(roster.columns), roster.tid_column if self.vertical else None)  # TID
            self._tally_key = tally_key(keys[shared], PROTOCOL, self.settings.run_id)
            if is_dp(self.settings.config):  # only the sample is padded, encrypted and sent (dp_release.py)
                self.local, outcome.sample = sample_share(self.settings.config, self.me, self.local, self._tally_key,
                                                          self.vertical, self.settings.run_id)
            self.transport.send(self.helper, "c/data", self._share(roster, keys, counter_key, screen_key))
        with timer.phase("integrate"):
            # the helper relays the progress of the slowest primary's encryption, then integrates
            verdict, _ = open_control(receive_progressing(self.ctx, self.helper, "c/integrated", "integrate",
                                                          via_relay=True),
                                      Verdict, "integration verdict")
            verdict.raise_if_stopped()
        if self.me == self.key_holder:
            with timer.phase("anonymize"):
                judge = self._judge()
            with timer.phase("decrypt"):
                outcome.output, facts = self._final(judge, keys)
            if self.dp_report is not None:  # the full entry: the helper's lacks what the true rows give
                facts["dp"] = self.dp_report
            outcome.report.update({"key_holder_checks": judge.checks, **facts})
        else:
            with timer.phase("decrypt"):
                # the whole search: the helper marks progress after its checks
                request, rparts = open_control(receive_progressing(self.ctx, self.helper, "c/tally-request",
                                                                   "anonymize", via_relay=True),
                                               Verdict, "tally request")
                self.transport.send(self.key_holder, "c/tally", self._tally(keys, request, rparts).to_json())
                done, _ = open_control(receive_progressing(self.ctx, self.helper, "c/done", "decrypt", via_relay=True),
                                       Verdict, "completion notice")
                done.raise_if_stopped()
                outcome.report.update(done.report)
        outcome.report.update(role_report(self.ctx, PROTOCOL, "primary", timer, PHASES))
        return outcome


# ----------------------------------------------------------------------------- helper


@guarded
def run_helper(ctx: RoleContext) -> RoleOutcome:
    """The helper: integrate padded ciphertext, search with encrypted counts, hand the result over."""
    return _Helper(ctx).run()


class _Helper(HelperRole):
    def __init__(self, ctx: RoleContext) -> None:
        refuse_unsupported(ctx)
        super().__init__(ctx, PROTOCOL)
        self.key_holder = self.settings.result_recipient
        self.hybrid = self.settings.distribution == HYBRID
        self.vertical = self.settings.distribution == "vertical" or self.hybrid  # joined on the TID
        self._joined_of: dict[str, np.ndarray] = {}  # hybrid: per primary, which of its rows the join kept
        # the others' next message after the search is the tally request
        self.search_progress = ProgressTicker(ctx, [p for p in self.primaries if p != self.key_holder],
                                              "c/tally-request")
        self.round_trips = 0  # c/check -> c/answer exchanges with the key holder during the search
        self.values: dict[str, list[bytes]] = {}  # class-mean columns: each row's Enc(value) (class_means.py)

    def _roster(self) -> tuple[Roster, dict[str, bytes], str | None, Any]:
        """Collect hellos; answer with the roster or stop everyone before data moves."""
        settings = self.settings
        received = {p: receive_control(self.transport, p, "c/hello", Hello, f"hello of {p!r}") for p in self.primaries}
        hellos = {p: h for p, (h, _) in received.items()}
        errors: list[str] = []
        verdict = None
        try:
            check_supported(checked_config(settings.config, settings.options))
            counter_scheme(settings.options)
            pseudotuple_share(settings.options)
            if settings.options.get("per_party_keys"):
                raise ProtocolError("option per_party_keys is not available in Protocol C")
            means = mean_columns(settings.options)
            if means and (self.vertical or counter_scheme(settings.options) != "paillier" or settings.config.needs_subset):
                raise ProtocolError("class means (option aggregate_means) need a horizontal split, counters "
                                    "'paillier' and no research subset")
            roles = set(settings.config.quasi_identifiers) | set(settings.config.sensitive_attributes)
            if roles & set(means):
                raise ProtocolError(f"column(s) {sorted(roles & set(means))} are quasi-identifiers or sensitive, "
                                    "not class means")
            if self.key_holder not in self.primaries:
                raise ProtocolError(f"result recipient (key holder) {self.key_holder!r} is not a primary party")
            summaries = {p: h.summary() for p, h in hellos.items()}
            verdict = (check_hybrid_schemas(settings.config, summaries) if self.hybrid
                       else check_schemas(settings.distribution, settings.config, summaries))
            errors.extend(verdict.errors)
        except FedanonError as exc:
            errors.append(f"invalid run configuration: {exc}")
        key_parts = received.get(self.key_holder, (None, {}))[1]
        if not errors and "counter_key" not in key_parts:
            errors.append(f"key holder {self.key_holder!r} sent no counter key")
        if not errors and wants_screen_counters(settings) and "screen_key" not in key_parts:
            errors.append(f"key holder {self.key_holder!r} sent no screening key")
        if errors:
            message = "run stopped before any data was sent: " + "; ".join(errors)
            for p in self.primaries:
                send_control(self.transport, p, "c/roster", Roster(ok=False, error=message))
            raise shared_error(message)
        tid = hellos[self.primaries[0]].tid_column if self.vertical else None
        roster = Roster(ok=True, columns=verdict.columns, owners=verdict.owners, tid_column=tid,
                        public_keys={p: h.public_key for p, h in hellos.items()}, bindings=roster_bindings(hellos),
                        holders=getattr(verdict, "holders", {}))
        if self.hybrid:  # every group pads with the same fake TIDs (see `group_pseudotuples`)
            roster.report = {"pseudotuples": group_pseudotuples(
                [sum(hellos[p].rows for p in g) for g in verdict.groups], pseudotuple_share(settings.options))}
        counter = {k: v for k, v in key_parts.items()
                   if k in _KEY_HOLDER_KEYS or k.removesuffix("_signature") in _KEY_HOLDER_KEYS}
        for p in self.primaries:
            send_control(self.transport, p, "c/roster", roster, **counter)
        return roster, counter, tid, verdict

    def _integrate(self, shares: dict[str, dict[str, bytes]], tid: str | None, verdict: Any,
                   counter_key: CounterPublicKey, screen_key: CounterPublicKey | None = None
                   ) -> tuple[EncodedTable, dict[str, Hierarchy], RowCounters, list[bytes]]:
        tables = {p: codec.decode_table(codec.require_part(s, "table", f"data of {p!r}"), f"table of {p!r}")
                  for p, s in shares.items()}
        h_shares: dict[str, list[tuple[str, Hierarchy]]] = {}
        for p, s in shares.items():
            for name, blob in s.items():
                if name.startswith("h/"):
                    h_shares.setdefault(name[2:], []).append((p, codec.decode_hierarchy(blob, f"hierarchy of {p!r}")))
        merged = merge_all_hierarchies(h_shares)
        errors = list(merged.height_mismatch)
        errors += [f"hierarchies of column {c.column!r} disagree between parties {c.parties[0]!r} and "
                   f"{c.parties[1]!r} at level {c.level}" for c in merged.conflicts]
        missing = [c for c in needed_hierarchies(self.settings.config) if c not in merged.hierarchies]
        if missing:
            errors.append(f"no party sent a hierarchy for column(s) {missing}")
        if errors:
            raise stop_run(self.ctx, "run stopped during integration: " + "; ".join(errors), "integration")

        def counters(p: str, name: str, rows: int | None = None) -> list[bytes]:
            return _split_counters(codec.require_part(shares[p], name, f"data of {p!r}"),
                                   tables[p].n_rows if rows is None else rows, f"{name} of {p!r}")

        delta = self.settings.config.needs_subset
        if self.hybrid:
            return self._integrate_hybrid(shares, tables, verdict, counter_key, merged.hierarchies, counters)
        screen: list[bytes] | None = None
        if not self.vertical:
            table = append_tables([tables[p] for p in self.primaries])

            def appended(name: str) -> list[bytes]:
                """Ciphertexts `name` of every primary, in the appended table's row order."""
                return [c for p in self.primaries for c in counters(p, name)]

            real = appended("counters/real")
            if screen_key is not None:
                screen = appended("counters/screen")
            self.values = {name: appended(f"values/{name}") for name in mean_columns(self.settings.options)}
            subset = appended("counters/subset") if delta else None
        else:
            keyed = {p: token_keys(codec.require_part(shares[p], "tids", f"data of {p!r}"), tables[p].n_rows,
                                   f"data of {p!r}") for p in self.primaries}
            mismatch = check_tids(keyed)
            if mismatch is not None:
                raise stop_run(self.ctx, "run stopped during integration: TID sets differ between the parties "
                                         "(pseudotuples included)", "integration")
            table, alignment = join_on_tid({p: tables[p] for p in self.primaries}, keyed)

            def dealt_counters(name: str) -> list[bytes]:
                """Counters `name` in joined-row order, each from the primary its TID is dealt to."""
                out = [b""] * table.n_rows
                for index, p in enumerate(self.primaries):
                    dealt = counter_owner(shares[p]["tids"], tables[p].n_rows, len(self.primaries)) == index
                    received = counters(p, name, int(dealt.sum()))
                    rank = np.cumsum(dealt) - 1  # p's row -> position among p's counters
                    rows_p = alignment[p]  # p's row of every joined row
                    for r in np.flatnonzero(dealt[rows_p]).tolist():
                        out[r] = received[int(rank[rows_p[r]])]
                return out

            real = dealt_counters("counters/real")
            if screen_key is not None:
                screen = dealt_counters("counters/screen")
            subset = None
            if delta:
                holder = verdict.subset_holder
                rows = counters(holder, "counters/subset")
                subset = [rows[i] for i in alignment[holder].tolist()]
        # the per-class sums may use every core (Paillier: pool workers read the counters
        # from shared memory); `run` unloads them when the run ends
        loaded = RowCounters(counter_key.load(real, workers=None),
                             None if subset is None else counter_key.load(subset, workers=None),
                             None if screen is None or screen_key is None else screen_key.load(screen))
        return table, merged.hierarchies, loaded, real

    def _class_sums(self, output: EncodedTable, perm: np.ndarray, counter_key: CounterPublicKey) -> dict[str, bytes]:
        """Enc(class sum) of each class-mean column over the result's classes (the padded rows grouped
        by their generalized QIs), in a random class order, and each result row's class number."""
        qi_index = [output.column_index(q) for q in self.settings.config.quasi_identifiers]
        _first, row_class = group_keys([output.codes[:, c].astype(np.int64) for c in qi_index],
                                       [max(len(output.dictionaries[c]), 1) for c in qi_index])
        row_class = row_class.reshape(-1)
        g = int(row_class.max()) + 1 if row_class.size else 0
        order = random_permutation(g)  # position j carries class order[j]
        position = np.empty(g, dtype=np.int64)
        position[order] = np.arange(g)
        parts = {"classes": position[row_class[perm]].astype(np.int32).tobytes()}
        bounds = class_bounds(np.bincount(row_class, minlength=g))
        for name, ciphertexts in self.values.items():
            sums = counter_key.sum_by_class(counter_key.load(ciphertexts), row_class.tolist(), g)
            parts[f"sums/{name}"] = counter_key.sums_message(sums, bounds, order.tolist())
        return parts

    def _integrate_hybrid(self, shares: dict[str, dict[str, bytes]], tables: dict[str, EncodedTable], verdict: Any,
                          counter_key: CounterPublicKey, hierarchies: dict[str, Hierarchy], counters: Any
                          ) -> tuple[EncodedTable, dict[str, Hierarchy], RowCounters, list[bytes]]:
        """Append each column group, join the groups on TID tokens (persons some group lacks are
        dropped), and take each joined row's real-row counter from the group its token is dealt to."""
        keyed = {p: token_keys(codec.require_part(shares[p], "tids", f"data of {p!r}"), tables[p].n_rows,
                               f"data of {p!r}") for p in self.primaries}
        joined = join_groups(verdict.groups, tables, keyed)
        if joined.duplicates:
            groups = sorted({tuple(sorted(set(d.parties))) for d in joined.duplicates})
            raise stop_run(self.ctx, "run stopped during integration: an identifier occurs twice in the column "
                                     f"group of {', '.join(str(list(g)) for g in groups)}", "integration")
        table = joined.table
        real = [b""] * table.n_rows
        for index, group in enumerate(verdict.groups):
            for p in group:
                dealt = counter_owner(shares[p]["tids"], tables[p].n_rows, len(verdict.groups)) == index
                received = counters(p, "counters/real", int(dealt.sum()))
                rank = np.cumsum(dealt) - 1
                rows_p = joined.rows_of[p]
                for r in np.flatnonzero((rows_p >= 0) & dealt[np.maximum(rows_p, 0)]).tolist():
                    real[r] = received[int(rank[rows_p[r]])]
        if any(not c for c in real):
            raise stop_run(self.ctx, "run stopped during integration: a joined row has no real-row counter",
                           "integration")
        self._joined_of = {p: joined_flags(joined.rows_of[p], tables[p].n_rows) for p in self.primaries}
        self.hybrid_report = {"persons_per_group": joined.persons_per_group, "persons_dropped": joined.dropped,
                              "groups": [list(g) for g in verdict.groups]}
        loaded = RowCounters(counter_key.load(real, workers=None), None)
        return table, hierarchies, loaded, real

    def _send_sums(self, blob: bytes) -> None:
        """DP run: one step's candidate sums to the key holder (`dp_release.serve_walk`)."""
        self.round_trips += 1
        self.transport.send(self.key_holder, SUMS, blob)

    def _ask(self, request: bytes) -> bytes:
        self.round_trips += 1
        self.transport.send(self.key_holder, "c/check", request)
        answer = receive_progressing(self.ctx, self.key_holder, "c/answer", "anonymize")
        self.search_progress.tick()  # the other primaries wait for the end of the search
        return answer

    def run(self) -> RoleOutcome:
        settings = self.settings
        config = settings.config
        transport = self.transport
        timer = self.timer
        outcome = RoleOutcome()
        with timer.phase("encrypt"):
            roster, counter, tid, verdict = self._roster()
            counter_key = counter_public_key_from_bytes(counter["counter_key"])
            screen_key = counter_public_key_from_bytes(counter["screen_key"]) if "screen_key" in counter else None
            leader = self.primaries[0]
            for p in self.primaries[1:]:  # blind relay: sealed for p, unreadable here
                transport.send(p, "c/keys", transport.receive(leader, f"c/keys-for/{p}"))
            # primaries waiting for the integration hear how the slowest encryption advances
            relay = ProgressTicker(self.ctx, self.primaries, "c/integrated")
            shares = {p: codec.unpack_message(receive_progressing(self.ctx, p, "c/data", "encrypt", relay.tick),
                                              f"data of {p!r}") for p in self.primaries}
        with timer.phase("integrate"):
            table, hierarchies, counters, _ = self._integrate(shares, tid, verdict, counter_key, screen_key)
            for p in self.primaries:
                send_control(transport, p, "c/integrated", Verdict(ok=True))
        checker: EncryptedCountChecker | None = None
        try:
            with timer.phase("anonymize"):
                try:
                    structure = prepare_structure(table, hierarchies, judge_config(config) if is_dp(config) else config,
                                                  require_subset=False)
                except FedanonError as exc:
                    raise stop_run(self.ctx, f"anonymization failed at the helper: {exc}", "engine") from None
                checker = EncryptedCountChecker(structure, counter_key, counters, self._ask, screen_key)
                transport.send(self.key_holder, "c/setup", checker.setup_request())
                if is_dp(config):  # the key holder scores and draws; we sum (dp_release.py)
                    levels, dp, scored = serve_walk(
                        checker, [int(h) for h in structure.lattice.heights],
                        lambda: receive_progressing(self.ctx, self.key_holder, STEP, "anonymize"),
                        self._send_sums, self.search_progress.tick)
                    searched: dict[str, Any] = {"dp": dp, "checks": scored, "optimum_found": False,
                                                "algorithm": DP_ALGORITHM}
                else:
                    facts = json.loads(receive_progressing(self.ctx, self.key_holder, "c/facts", "anonymize"))
                    checker.adopt(JudgeFacts(**facts))
                    try:
                        found = search(structure, checker)
                    except NoSolutionError as exc:
                        raise stop_run(self.ctx, str(exc), "no-solution") from None
                    transport.send(self.key_holder, "c/check", DONE)
                    levels = structure.lattice.node_levels(found.node)
                    searched = {"information_loss": float(found.loss), "metric": config.metric,
                                "checks": found.checks, "algorithm": found.algorithm}
            with timer.phase("decrypt"):
                output = generalize(structure, levels)
                n = output.n_rows
                perm = random_permutation(n)
                parts = {"table": codec.encode_table(EncodedTable(list(output.columns), output.codes[perm],
                                                                  output.dictionaries))}
                bounds = [_ROW_COUNTER_BOUND] * n  # the row counters themselves, packed, in the new order
                parts["counters/real"] = counter_key.sums_message(counters.real, bounds, perm.tolist())
                if counters.subset is not None:
                    parts["counters/subset"] = counter_key.sums_message(counters.subset, bounds, perm.tolist())
                if self.values:
                    parts.update(self._class_sums(output, perm, counter_key))
                report = {"transformation": {q: int(l) for q, l in zip(config.quasi_identifiers, levels)},
                          **searched, "rollups": checker.rollups, "suppression_rounds": checker.suppression_rounds,
                          "screened_checks": checker.screened, "key_holder_round_trips": self.round_trips,
                          "lattice_size": structure.lattice.size, "rows_with_pseudotuples": n,
                          "counters": counter_key.scheme, "pseudotuple_share": pseudotuple_share(settings.options)}
                send_control(transport, self.key_holder, "c/result", Verdict(ok=True, report=report), **parts)
                if self.hybrid:
                    report["integration"] = self.hybrid_report
                for p in self.primaries:  # each primary tells the key holder what the result must hold of it
                    joined = ({"joined": codec.encode_flags(self._joined_of[p])} if self.hybrid else {})
                    send_control(transport, p, "c/tally-request",
                                 Verdict(ok=True, report={"transformation": report["transformation"]}), **joined)
                # the others finish only once the key holder has checked and accepted the result
                accepted, _ = open_control(receive_progressing(self.ctx, self.key_holder, "c/accepted", "decrypt"),
                                           Verdict, "acceptance")  # the key holder decrypts every row counter first
                accepted.raise_if_stopped()
                for p in self.primaries:
                    if p != self.key_holder:
                        send_control(transport, p, "c/done", Verdict(ok=True, report=report))
        finally:  # e.g. the shared-memory blocks of the Paillier counters and bottom sums
            if checker is not None:
                checker.close()
            counter_key.unload(counters.real)
            if counters.subset is not None:
                counter_key.unload(counters.subset)
            if counters.screen is not None and screen_key is not None:
                screen_key.unload(counters.screen)
        outcome.report.update(report)
        outcome.report.update(role_report(self.ctx, PROTOCOL, "helper", timer, PHASES))
        return outcome


ROLES = {"primary": run_primary, "helper": run_helper}
