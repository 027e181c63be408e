"""Protocol B (§4.4.4): shared deterministic AES keys, star topology around a helper.

Roles and messages (every primary talks only to the helper; the helper relays sealed
key bundles it cannot read):

encrypt    primary -> helper   b/hello       schema facts, X25519 public key (+ TLS-key signature), local checks
           helper  -> primary  b/roster      ok + everyone's public keys, or the error that stops the run
           leader  -> helper   b/keys-for/P  column keys sealed for primary P   (relayed as b/keys)
           primary -> helper   b/data        encrypted, permuted table + hierarchies (+ TID tokens, subset flags)
integrate  helper  -> primary  b/integrated  ok, or the conflict/TID problem (with ciphertexts to name)
anonymize  helper runs the unchanged engine on ciphertext
decrypt    helper  -> recipient b/result     re-permuted encrypted output + suppression mask + report
           helper  -> owner     b/decrypt    (vertical, per-party keys) the owner's output dictionaries
           owner   -> helper    b/plain      those dictionaries decrypted, sealed for the recipient
           helper  -> primary   b/tally-request the transformation + which of its rows were released / suppressed
           primary -> recipient b/tally     DIRECT (not via the helper): its row count and multiset digest
                                            (protocols/release_tally.py); the recipient checks the release
           recipient -> helper  b/accepted   after checking the result (privacy model, own rows:
                                             protocols/resultcheck.py); a rejection stops the run everywhere
           helper  -> others    b/done       report (no data)

The leader (first primary) draws one AES-256-SIV key per column; the run id and the
column name are bound into each cipher's context. With option `per_party_keys`
(vertical only) every primary draws its own column keys and only the TID key is
shared; decryption then needs each owner. Errors detected anywhere are sent to
every party, so all of them stop with the same clear message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedanon.crypto.deterministic import generate_key
from fedanon.engine.anonymizer import anonymize
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.result import NoSolutionError
from fedanon.engine.settings import keep_engine_private
from fedanon.data.table import EncodedTable
from fedanon.errors import FedanonError, ProtocolError
from fedanon.protocols.dp.release import (check_config, dp_model, keep_persons, keep_rows, refuse_unsupported,
                                         sampled, search)
from fedanon.protocols.kit import codec
from fedanon.protocols.kit.api import RoleContext, RoleOutcome
from fedanon.protocols.kit.cellcrypt import (
    ColumnCiphers,
    encode_share,
    random_permutation,
    token_keys,
    utf8_dictionary,
    verify_suppression,
)
from fedanon.protocols.kit.integration import append_tables, check_tids, join_on_tid, merge_all_hierarchies
from fedanon.protocols.hybrid.join import (
    HYBRID,
    check_grouped_tallies,
    check_hybrid_schemas,
    column_groups,
    held_by,
    join_groups,
    released_local,
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
from fedanon.protocols.kit.roles import (
    HelperRole,
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
from fedanon.protocols.kit.release_tally import Tally, check_tallies, own_tally, shared_key_column, tally_key
from fedanon.protocols.kit.resultcheck import check_result
from fedanon.protocols.kit.validation import LocalProblem
from fedanon.protocols.kit.validation import check_schemas, hello_summary, local_checks, needed_hierarchies

PHASES = ("encrypt", "integrate", "anonymize", "decrypt")


# ----------------------------------------------------------------------------- helpers


@dataclass
class ResultNotice(Verdict):
    """The helper's b/result message: verdict, report and who decrypts which columns."""

    owners_decrypting: list[str] = field(default_factory=list)


PROTOCOL = "B"


def _plain_context(run_id: str) -> bytes:
    return b"fedanon/B/v1/decrypted-dictionaries/" + run_id.encode("utf-8")


def _hierarchy_scope(ctx: RoleContext) -> str:
    scope = ctx.settings.options.get("hierarchy_scope", "full")
    if scope not in ("full", "data"):
        raise ProtocolError(f"option hierarchy_scope must be 'full' or 'data', got {scope!r}")
    if scope == "data" and dp_model(ctx.settings.config) is not None:
        # the DP score's leaf counts must not depend on the data, or its sensitivity bound fails
        raise ProtocolError("option hierarchy_scope 'data' cannot be combined with --dp: SafePub scores with the "
                            "full hierarchies")
    return scope


def _per_party_keys(ctx: RoleContext) -> bool:
    value = bool(ctx.settings.options.get("per_party_keys", False))
    if value and ctx.settings.distribution != "vertical":
        raise ProtocolError("option per_party_keys applies only to vertical distributions")
    return value


# ----------------------------------------------------------------------------- primary


@guarded
def run_primary(ctx: RoleContext) -> RoleOutcome:
    """One data-holding party: validate, agree keys, encrypt+permute+send, decrypt if recipient."""
    return _Primary(ctx).run()


class _Primary(KeySharingPrimary):
    def __init__(self, ctx: RoleContext) -> None:
        refuse_unsupported(ctx)  # a DP release the registry says B cannot make (a hybrid layout)
        super().__init__(ctx, PROTOCOL)
        self.recipient = self.settings.result_recipient
        self.run_id = self.settings.run_id

    # -- encrypt -------------------------------------------------------------------
    def _hello(self) -> Roster:
        config = self.settings.config
        problems = local_checks(self.me, self.local, config, self.settings.distribution)
        hello = Hello(**hello_summary(self.local, config), local_errors=[p.public for p in problems])
        if dp_model(config) is not None:
            hello.rows = 0  # a DP run announces no row count: the helper learns only the sample's
        bind_hello(hello, self.identity, self.tls, PROTOCOL, self.run_id)  # the helper cannot swap our key
        send_control(self.transport, self.helper, "b/hello", hello)
        if not problems:  # key-independent work overlaps the wait for the roster and keys
            self._prepared = self._prepare_share()
        try:
            roster, _ = receive_control(self.transport, self.helper, "b/roster", Roster, "roster")
        except FedanonError:
            if problems:  # stopped before the verdict reached us: still say what is wrong with our data
                raise mark_shared(LocalFailure(problems)) from None
            raise
        if problems:  # name our own values locally, in addition to the global verdict
            roster.raise_if_stopped("details at this party: " + LocalFailure(problems).private)
            raise mark_shared(LocalFailure(problems))  # str() public; .private for this party's own log
        roster.raise_if_stopped()
        return roster

    def _verified_publics(self, roster: Roster) -> dict[str, bytes]:
        return verified_publics(self.me, roster, self.tls, PROTOCOL, self.run_id)

    def _agree_keys(self, roster: Roster) -> ColumnCiphers:
        publics = self._verified_publics(roster)
        columns = roster.columns
        owners = roster.owners
        tid = roster.tid_column
        per_party = _per_party_keys(self.ctx)
        vertical = self.settings.distribution in ("vertical", HYBRID)  # keys per column, a shared TID key
        context = keys_context(PROTOCOL, self.run_id)
        mine: dict[str, bytes]
        if self.me == self.leader:
            shared: dict[str, bytes] = {}
            if vertical and tid:
                shared[tid] = generate_key()
            if not per_party:
                for c in columns:
                    shared[c] = generate_key()
            bundles: dict[str, dict[str, bytes]] = {}
            for party in self.settings.primaries:
                if party == self.me:
                    continue
                if vertical and not per_party:
                    wanted = {tid} | held_by(roster, party)
                    if party == self.recipient:
                        wanted |= set(columns)
                    bundles[party] = {c: k for c, k in shared.items() if c in wanted}
                else:
                    bundles[party] = shared
            send_bundles(self.identity, self.transport, self.helper, publics, bundles, "b/keys-for", context)
            mine = dict(shared)
        else:
            mine = receive_bundle(self.identity, self.transport, self.helper, self.leader, publics, "b/keys", context)
        # the release tally's key: from a key every primary holds and the helper does not
        self._tally_key = tally_key(mine[shared_key_column(columns, tid if vertical else None)], PROTOCOL, self.run_id)
        if per_party:
            for c, owner in owners.items():
                if owner == self.me:
                    mine[c] = generate_key()
        return ColumnCiphers(self.run_id, mine)

    def _prepare_share(self) -> tuple[np.ndarray, EncodedTable, list[str] | None]:
        """Permute and dictionary-encode the local share (no keys needed yet)."""
        local = self.local
        tid = local.tid_column if self.settings.distribution in ("vertical", HYBRID) else None
        columns = [c for c in local.columns if c != tid]
        perm = random_permutation(len(local.rows))
        table = encode_share(columns, local.rows, [local.columns.index(c) for c in columns], perm)
        tids = None
        if tid is not None:
            t = local.columns.index(tid)
            tids = [row[t] for row in local.rows]  # original order; tokens are permuted as an array
        return perm, table, tids

    def _sample(self) -> np.ndarray:
        """DP run: keep only the sampled rows from here on (`protocols/dp/release.py`)."""
        local, config = self.local, self.settings.config
        if self.settings.distribution == "vertical" and local.tid_column is not None:
            t = local.columns.index(local.tid_column)
            keep = keep_persons(config, self._tally_key, PROTOCOL, self.run_id, [row[t] for row in local.rows])
        else:
            keep = keep_rows(config, self.me, len(local.rows))
        self.local = sampled(local, keep)
        self._prepared = self._prepare_share()
        return np.flatnonzero(keep)

    def _encrypt_share(self, roster: Roster, ciphers: ColumnCiphers) -> bytes:
        config = self.settings.config
        local = self.local
        perm, table, tids = self._prepared
        if self.settings.distribution == "horizontal" and table.columns != list(roster.columns):
            table = table.select(list(roster.columns))  # everyone in the leader's column order
        elif self.settings.distribution == HYBRID:  # a column group's parties append: one column order
            table = table.select([c for c in roster.columns if c in table.columns])
        columns = table.columns
        self._sent = table  # plaintext, in the order sent: what the release tally is computed on
        parts: dict[str, bytes] = {"table": codec.encode_table(ciphers.encrypt_table(table))}
        if tids is not None and local.tid_column is not None:
            tokens = np.frombuffer(ciphers.tid_tokens(local.tid_column, tids), dtype=np.uint8)
            parts["tids"] = tokens.reshape(len(tids), -1)[perm].tobytes()
        scope = _hierarchy_scope(self.ctx)
        for column in needed_hierarchies(config):
            if column not in columns:
                continue
            hierarchy = local.hierarchies[column]
            h_rows = hierarchy.rows
            if scope == "data":
                present = set(table.dictionaries[columns.index(column)])
                h_rows = [r for r in h_rows if r[0] in present]
            h_rows = [h_rows[i] for i in random_permutation(len(h_rows)).tolist()]
            encrypted = ciphers.encrypt_hierarchy(Hierarchy(column, h_rows, hierarchy.source), column)
            parts[f"h/{column}"] = codec.encode_hierarchy(encrypted)
        if config.needs_subset and local.research_subset is not None:
            parts["subset"] = codec.encode_flags(np.asarray(local.research_subset, dtype=bool)[perm])
        return codec.pack_message(parts)

    # -- decrypt -------------------------------------------------------------------
    def _decrypt_result(self, parts: dict[str, bytes], ciphers: ColumnCiphers,
                        plain: dict[str, list[bytes]]) -> EncodedTable:
        """The result in plaintext: the helper's codes with every column's dictionary decrypted."""
        table = codec.decode_table(codec.require_part(parts, "table", "result"), "result table")
        qis = set(self.settings.config.quasi_identifiers)
        dictionaries: list[list[bytes]] = []
        for column, dictionary in zip(table.columns, table.dictionaries):
            if column in plain:
                values = plain[column]
                if len(values) != len(dictionary):
                    raise ProtocolError(f"decrypted dictionary of column {column!r} has the wrong size")
            else:
                values = ciphers.decrypt_dictionary(column, dictionary, allow_suppressed=column in qis)
            dictionaries.append(utf8_dictionary(column, values))
        out = EncodedTable(list(table.columns), table.codes, dictionaries)
        if "suppressed" in parts:  # the engine's mask: check that exactly these rows carry '*' QIs
            verify_suppression(out, codec.decode_flags(parts["suppressed"], "suppression mask"), qis)
        return out

    def _decrypt_for_recipient(self, ciphers: ColumnCiphers, roster: Roster) -> None:
        """Per-party keys: decrypt this owner's output dictionaries and seal them for the recipient."""
        control, parts = receive_control(self.transport, self.helper, "b/decrypt", Verdict, "decryption request")
        control.raise_if_stopped()
        request = codec.decode_table(codec.require_part(parts, "dictionaries", "decryption request"))
        qis = set(self.settings.config.quasi_identifiers)
        plain = {c: ciphers.decrypt_dictionary(c, d, allow_suppressed=c in qis)
                 for c, d in zip(request.columns, request.dictionaries)}
        publics = self._verified_publics(roster)
        sealed = self.identity.seal(self.recipient, publics[self.recipient],
                                    codec.encode_table_parts(list(plain), np.zeros((0, len(plain)), np.int32),
                                                             list(plain.values())),
                                    _plain_context(self.run_id))
        self.transport.send(self.helper, "b/plain", sealed)

    def run(self) -> RoleOutcome:
        timer = self.timer
        transport = self.transport
        outcome = RoleOutcome()
        with timer.phase("encrypt"):
            roster = self._hello()
            ciphers = self._agree_keys(roster)
            if dp_model(self.settings.config) is not None:
                outcome.sample = self._sample()
            transport.send(self.helper, "b/data", self._encrypt_share(roster, ciphers))
        with timer.phase("integrate"):
            verdict, parts = receive_control(transport, self.helper, "b/integrated", Verdict, "integration verdict")
            if not verdict.ok:
                verdict.raise_if_stopped(self._name_findings(verdict, parts, ciphers))
        per_party = _per_party_keys(self.ctx)
        owns_columns = any(o == self.me for o in roster.owners.values())
        with timer.phase("decrypt"):
            if self.me == self.recipient:
                notice, parts = receive_control(transport, self.helper, "b/result", ResultNotice, "result")
                notice.raise_if_stopped()
                self._check_tallies(roster, ciphers, parts, notice.report)
                plain: dict[str, list[bytes]] = {}
                if per_party:
                    publics = self._verified_publics(roster)
                    for owner in notice.owners_decrypting:
                        sealed = transport.receive(self.helper, f"b/plain/{owner}")
                        blob = self.identity.open(owner, publics[owner], sealed, _plain_context(self.run_id))
                        cols, _, dicts = codec.decode_table_parts(blob, f"decrypted dictionaries of {owner!r}")
                        for c, d in zip(cols, dicts):
                            if roster.owners.get(c) != owner:
                                raise ProtocolError(f"party {owner!r} sent values for column {c!r} it does not own")
                            plain[c] = d
                outcome.output = self._decrypt_result(parts, ciphers, plain)
                outcome.report.update(notice.report)
                self._accept(outcome, parts, notice.report)
            else:
                transport.send(self.recipient, "b/tally", self._tally(roster, ciphers).to_json())
                if per_party and owns_columns:
                    self._decrypt_for_recipient(ciphers, roster)
                done, _ = receive_control(transport, self.helper, "b/done", Verdict, "completion notice")
                done.raise_if_stopped()
                outcome.report.update(done.report)
        outcome.report.update(role_report(self.ctx, "B", "primary", timer, PHASES))
        return outcome

    def _tally(self, roster: Roster, ciphers: ColumnCiphers) -> Tally:
        """What the release must hold of our rows, from the helper's flags and transformation (`release_tally`)."""
        request, parts = receive_control(self.transport, self.helper, "b/tally-request", Verdict, "tally request")
        request.raise_if_stopped()
        released = codec.decode_flags(codec.require_part(parts, "released", "tally request"), "released flags")
        suppressed = codec.decode_flags(codec.require_part(parts, "suppressed", "tally request"), "suppressed flags")
        subset = self.local.research_subset
        if self.settings.config.needs_subset and subset is not None:
            perm = self._prepared[0]
            if len(released) != len(perm) or not np.array_equal(released, np.asarray(subset, dtype=bool)[perm]):
                raise ProtocolError(f"party {self.me!r}: the helper released rows other than its research subset")
        tid = roster.tid_column if self.settings.distribution in ("vertical", HYBRID) else None
        columns = [c for c in roster.columns if c != tid]
        if self.settings.distribution == "vertical":
            columns = [c for c in columns if roster.owners.get(c) == self.me]
        elif self.settings.distribution == HYBRID:
            mine = held_by(roster, self.me)
            columns = [c for c in columns if c in mine]
        self._released = released
        transformation = request.report.get("transformation")
        if not isinstance(transformation, dict):
            raise ProtocolError("the helper's tally request names no transformation")
        return own_tally(self.me, self._tally_key, self._sent, columns, released, suppressed, transformation,
                         self.local.hierarchies, ciphers)

    def _check_tallies(self, roster: Roster, ciphers: ColumnCiphers, parts: dict[str, bytes],
                       report: dict[str, Any]) -> None:
        """The release as a multiset, before anything is decrypted: every primary's count and digest,
        each received straight from that primary, must match it (`release_tally`)."""
        tallies = {self.me: self._tally(roster, ciphers)}
        for party in self.settings.primaries:
            if party != self.me:
                tallies[party] = Tally.from_json(self.transport.receive(party, "b/tally"), party)
        table = codec.decode_table(codec.require_part(parts, "table", "result"), "result table")
        transformation = report.get("transformation")
        if self.settings.distribution == HYBRID:
            problems = check_grouped_tallies(tallies, self._tally_key, table,
                                             transformation if isinstance(transformation, dict) else {},
                                             column_groups(roster))
        else:
            problems = check_tallies(tallies, self._tally_key, table, None,
                                     transformation if isinstance(transformation, dict) else {},
                                     self.settings.distribution == "vertical")
        if problems:
            text = "the helper deviated from the protocol: " + "; ".join(problems) + "; it was not accepted"
            raise LocalFailure([LocalProblem(text, text)])

    def _accept(self, outcome: RoleOutcome, parts: dict[str, bytes], report: dict[str, Any]) -> None:
        """Check the decrypted result (privacy model, own rows) and tell the helper; fail the run if it is wrong."""
        mask = codec.decode_flags(parts["suppressed"], "suppression mask") if "suppressed" in parts else None
        transformation = report.get("transformation")
        assert outcome.output is not None  # decrypted in `_decrypt_result`
        local = self.local
        if self.settings.distribution == HYBRID:  # persons some column group lacks were dropped
            local = released_local(local, self._prepared[0], self._released)
        problems = check_result(self.me, local, check_config(self.settings.config), self.settings.distribution,
                                outcome.output,
                                None if mask is None else mask.tolist(),
                                transformation if isinstance(transformation, dict) else None, outcome.report)
        if problems:
            raise LocalFailure(problems)  # public part only leaves this party
        send_control(self.transport, self.helper, "b/accepted", Verdict())

    def _tid_of_token(self, token: bytes, ciphers: ColumnCiphers) -> str | None:
        tid = self.local.tid_column
        if tid is None:
            return None
        t = self.local.columns.index(tid)
        values = [row[t] for row in self.local.rows]
        tokens = ciphers.tid_tokens(tid, values)
        width = len(token)
        for i, value in enumerate(values):
            if tokens[i * width:(i + 1) * width] == token:
                return value
        return None

    def _name_findings(self, verdict: Verdict, parts: dict[str, bytes], ciphers: ColumnCiphers) -> str:
        """Decrypt the ciphertexts the helper flagged (only the parties involved can)."""
        named: list[str] = []
        for i, finding in enumerate(verdict.findings):
            if self.me not in finding.get("parties", []):
                continue
            column = finding["column"]
            blob = parts.get(f"finding/{i}")
            if blob is None or column not in ciphers:
                continue
            if finding.get("token"):  # a TID token: recompute ours to find which TID it is
                value = self._tid_of_token(blob, ciphers)
                if value is None:
                    continue
            else:
                try:
                    value = ciphers.cipher(column).decrypt(blob).decode("utf-8", errors="backslashreplace")
                except FedanonError:
                    continue
            named.append(finding["template"].format(value=repr(value)))
        return "; ".join(named)


# ----------------------------------------------------------------------------- helper


@guarded
def run_helper(ctx: RoleContext) -> RoleOutcome:
    """The non-colluding helper: relay keys blindly, integrate, anonymize, return ciphertext."""
    return _Helper(ctx).run()


class _Helper(HelperRole):
    def __init__(self, ctx: RoleContext) -> None:
        refuse_unsupported(ctx)
        super().__init__(ctx, PROTOCOL)
        self._rows_of: dict[str, np.ndarray] = {}  # per primary: its row of every integrated row, or -1
        self._share_rows: dict[str, int] = {}
        if self.settings.result_recipient not in self.primaries:
            raise ProtocolError(
                f"result recipient {self.settings.result_recipient!r} is not a primary party ({self.primaries})"
            )

    def _stop(self, error: str, topic: str, kind: str = "validation",
              extra: dict[str, dict[str, bytes]] | None = None, findings: list[dict[str, Any]] | None = None,
              to: list[str] | None = None) -> None:
        """Tell every primary why the run stops, then stop here with the same message."""
        for party in to if to is not None else self.primaries:
            verdict = Verdict(ok=False, error=error, kind=kind, findings=findings or [])
            send_control(self.transport, party, topic, verdict, **((extra or {}).get(party, {})))
        raise shared_error(error, kind)

    def run(self) -> RoleOutcome:
        settings = self.settings
        config = settings.config
        transport = self.transport
        timer = self.timer
        vertical = settings.distribution in ("vertical", HYBRID)  # joined on the TID
        try:
            per_party = _per_party_keys(self.ctx)
            _hierarchy_scope(self.ctx)  # a bad scope stops the run at the roster, before any data moves
        except ProtocolError as exc:
            per_party = False
            option_error: str | None = str(exc)
        else:
            option_error = None
        outcome = RoleOutcome()
        with timer.phase("encrypt"):
            received = {p: receive_control(transport, p, "b/hello", Hello, f"hello of {p!r}")[0]
                        for p in self.primaries}
            hellos = {p: h.summary() for p, h in received.items()}
            try:
                verdict = (check_hybrid_schemas(config, hellos) if settings.distribution == HYBRID
                           else check_schemas(settings.distribution, config, hellos))
            except FedanonError as exc:
                self._stop(f"invalid run configuration: {exc}", "b/roster")
            if option_error:
                verdict.errors.append(option_error)
            if verdict.errors:
                self._stop("run stopped before any data was sent: " + "; ".join(verdict.errors), "b/roster")
            tid = hellos[self.primaries[0]]["tid_column"] if vertical else None
            roster = Roster(public_keys={p: h.public_key for p, h in received.items()},
                            bindings=roster_bindings(received),
                            columns=verdict.columns, owners=verdict.owners, tid_column=tid,
                            holders=getattr(verdict, "holders", {}))
            for p in self.primaries:
                send_control(transport, p, "b/roster", roster)
            leader = self.primaries[0]
            for p in self.primaries[1:]:  # blind relay: sealed for p, unreadable here
                transport.send(p, "b/keys", transport.receive(leader, f"b/keys-for/{p}"))
            shares = {p: codec.unpack_message(transport.receive(p, "b/data"), f"data of {p!r}") for p in self.primaries}
        with timer.phase("integrate"):
            table, hierarchies, subset, integration = self._integrate(shares, verdict, tid)
            for p in self.primaries:
                send_control(transport, p, "b/integrated", Verdict())
        with timer.phase("anonymize"):
            try:
                if dp_model(config) is not None:
                    result = search(table, hierarchies, config, self.me, PROTOCOL)
                else:
                    result = keep_engine_private(anonymize(table, hierarchies, config, research_subset=subset,
                                                           **self.ctx.engine.anonymize_options(table.n_rows)))
            except NoSolutionError as exc:
                raise stop_run(self.ctx, str(exc), "no-solution") from None
            except FedanonError as exc:
                raise stop_run(self.ctx, f"anonymization failed at the helper: {self.ctx.engine.redact(str(exc))}",
                               "engine") from None
        with timer.phase("decrypt"):
            report = {**result.to_report(), "integration": integration}
            # delta-presence releases only the research subset (as `fedanon anonymize` does);
            # the population rows served only to compute delta.
            released = np.arange(result.output.n_rows)
            if config.needs_subset and subset is not None:
                released = np.flatnonzero(subset)
            report["rows_released"] = int(len(released))
            perm = released[random_permutation(len(released))]
            output = EncodedTable(list(result.output.columns), result.output.codes[perm], result.output.dictionaries)
            decrypting = []
            if per_party:
                decrypting = sorted({o for o in verdict.owners.values() if o != settings.result_recipient},
                                    key=self.primaries.index)
            send_control(transport, settings.result_recipient, "b/result",
                           ResultNotice(report=report, owners_decrypting=decrypting),
                           table=codec.encode_table(output),
                           suppressed=codec.encode_flags(np.asarray(result.suppressed, dtype=bool)[perm]))
            self._request_tallies(released, np.asarray(result.suppressed, dtype=bool), report)
            for owner in decrypting:
                cols = [c for c in output.columns if verdict.owners.get(c) == owner]
                dicts = [output.dictionaries[output.columns.index(c)] for c in cols]
                request = codec.encode_table_parts(cols, np.zeros((0, len(cols)), np.int32), dicts)
                send_control(transport, owner, "b/decrypt", Verdict(), dictionaries=request)
                transport.send(settings.result_recipient, f"b/plain/{owner}", transport.receive(owner, "b/plain"))
            # the others finish only once the recipient has checked and accepted the result
            accepted, _ = receive_control(transport, settings.result_recipient, "b/accepted", Verdict, "acceptance")
            accepted.raise_if_stopped()
            for p in self.primaries:
                if p != settings.result_recipient:
                    send_control(transport, p, "b/done", Verdict(report=report))
        outcome.result = result
        outcome.report.update(role_report(self.ctx, "B", "helper", timer, PHASES, **report))
        return outcome

    def _request_tallies(self, released: np.ndarray, suppressed: np.ndarray, report: dict[str, Any]) -> None:
        """Tell every primary which of its rows (in the order it sent them) were released and suppressed,
        so that it can send the recipient its tally of the release (`release_tally`)."""
        integrated = len(next(iter(self._rows_of.values())))
        released = released[released < integrated]  # rows the engine made up belong to no primary
        flags = np.zeros(integrated, dtype=bool)
        flags[:min(integrated, len(suppressed))] = suppressed[:integrated]
        for p in self.primaries:
            rows = self._rows_of[p]  # p's row of every integrated row
            n = self._share_rows[p]
            mine = rows[released]
            out = np.zeros(n, dtype=bool)
            out[mine[mine >= 0]] = True
            valid = rows >= 0
            hidden = np.zeros(n, dtype=bool)
            hidden[rows[valid]] = flags[valid]
            send_control(self.transport, p, "b/tally-request",
                         Verdict(report={"transformation": report["transformation"]}),
                         released=codec.encode_flags(out), suppressed=codec.encode_flags(hidden))

    def _integrate(self, shares: dict[str, dict[str, bytes]], verdict: Any, tid: str | None
                   ) -> tuple[EncodedTable, dict[str, Hierarchy], np.ndarray | None, dict[str, Any]]:
        config = self.settings.config
        tables = {p: codec.decode_table(codec.require_part(s, "table", f"data of {p!r}"), f"table of {p!r}")
                  for p, s in shares.items()}
        h_shares: dict[str, list[tuple[str, Hierarchy]]] = {}
        for p, s in shares.items():
            for name, blob in s.items():
                if name.startswith("h/"):
                    h = codec.decode_hierarchy(blob, f"hierarchy {name[2:]!r} of {p!r}")
                    h_shares.setdefault(name[2:], []).append((p, h))
        flags = {p: codec.decode_flags(s["subset"], f"subset flags of {p!r}") for p, s in shares.items() if "subset" in s}
        for p, f in flags.items():
            if len(f) != tables[p].n_rows:
                self._stop(f"party {p!r} sent {len(f)} research-subset flags for {tables[p].n_rows} rows",
                           "b/integrated")
        merged = merge_all_hierarchies(h_shares)
        errors = list(merged.height_mismatch)
        findings: list[dict[str, Any]] = []
        extra: dict[str, dict[str, bytes]] = {p: {} for p in self.primaries}
        for conflict in merged.conflicts:
            a, b = conflict.parties
            errors.append(
                f"hierarchies of column {conflict.column!r} disagree between party {a!r} and party {b!r}: "
                f"a value at level {conflict.level} has different generalizations (the two parties name the value)"
            )
            i = len(findings)
            findings.append({"column": conflict.column, "parties": [a, b],
                             "template": f"the conflicting value of column {conflict.column!r} at level "
                                         f"{conflict.level} is {{value}}"})
            extra[a][f"finding/{i}"] = conflict.value
            extra[b][f"finding/{i}"] = conflict.value
        subset: np.ndarray | None = None
        hybrid_info: dict[str, Any] = {}
        if self.settings.distribution == "horizontal":
            if not errors:
                table = append_tables([tables[p] for p in self.primaries])
                start = 0
                for p in self.primaries:  # p's rows form one block of the integrated table
                    self._rows_of[p] = np.full(table.n_rows, -1, dtype=np.int64)
                    self._rows_of[p][start:start + tables[p].n_rows] = np.arange(tables[p].n_rows)
                    start += tables[p].n_rows
                if config.needs_subset:
                    subset = np.concatenate([flags[p] for p in self.primaries])
        elif self.settings.distribution == HYBRID:
            tokens = {p: token_keys(codec.require_part(shares[p], "tids", f"data of {p!r}"), tables[p].n_rows,
                                    f"data of {p!r}") for p in self.primaries}
            joined = join_groups(verdict.groups, tables, tokens)
            for duplicate in joined.duplicates:
                holders = sorted(set(duplicate.parties), key=self.primaries.index)
                errors.append(f"an identifier occurs twice in the column group of {holders} "
                              "(the parties name it)")
                i = len(findings)
                findings.append({"column": tid, "parties": holders, "token": True,
                                 "template": "identifier {value} is claimed twice in one column group"})
                for party in holders:
                    extra[party][f"finding/{i}"] = duplicate.token
            if not errors:
                table = joined.table
                self._rows_of = dict(joined.rows_of)
                hybrid_info = {"persons_per_group": joined.persons_per_group, "persons_dropped": joined.dropped,
                               "groups": [list(g) for g in verdict.groups]}
        else:
            tokens = {p: token_keys(codec.require_part(shares[p], "tids", f"data of {p!r}"), tables[p].n_rows,
                                    f"data of {p!r}") for p in self.primaries}
            mismatch = check_tids(tokens)
            if mismatch is not None:
                for party, count in mismatch.duplicates_at.items():
                    errors.append(f"party {party!r} sent {count} duplicate TID(s)")
                if mismatch.missing_at:
                    lacking = ", ".join(f"party {party!r} lacks {count}" for party, count in mismatch.missing_at.items())
                    errors.append(f"TID sets differ between the parties (TIDs held elsewhere: {lacking})")
                for party, cts in mismatch.only_at.items():
                    for ct in cts:
                        i = len(findings)
                        findings.append({"column": tid, "parties": [party], "token": True,
                                         "template": "TID {value} is missing at another party"})
                        extra[party][f"finding/{i}"] = ct
            if not errors:
                table, alignment = join_on_tid({p: tables[p] for p in self.primaries}, tokens)
                self._rows_of = {p: np.asarray(alignment[p]) for p in self.primaries}
                if config.needs_subset and verdict.subset_holder is not None:
                    subset = flags[verdict.subset_holder][alignment[verdict.subset_holder]]
        if errors:
            self._stop("run stopped during integration: " + "; ".join(errors), "b/integrated",
                       kind="integration", extra=extra, findings=findings)
        missing = [c for c in needed_hierarchies(config) if c not in merged.hierarchies]
        if missing:
            self._stop(f"no party sent a hierarchy for column(s) {missing}", "b/integrated")
        self._share_rows = {p: tables[p].n_rows for p in self.primaries}
        info = {"rows": int(table.n_rows), "columns": list(table.columns),
                "hierarchy_rules_received": merged.rules_received, "hierarchy_rules_kept": merged.rules_kept,
                **hybrid_info}
        return table, merged.hierarchies, subset, info


ROLES = {"primary": run_primary, "helper": run_helper}
