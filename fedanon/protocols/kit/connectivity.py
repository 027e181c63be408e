"""Protocol "CHECK": prove every channel of a run works before any data moves.

Each party sends every other party a fresh 32-byte random nonce and echoes back
what it receives; a party accepts a peer only if its own nonce comes back
unchanged. That exercises both directions of every pair through the real
transport (certificates, allow-lists, addresses) and yields per-pair round-trip
times. Diagnostic options (used by the network tests, harmless otherwise):

- `hold_s` / `hold_parties`: listed parties (default: all) wait `hold_s` seconds
  after the exchange, before a final "done" round, so a test can kill a daemon mid-run;
- `bulk_mb` / `bulk_from` / `bulk_to`: `bulk_from` streams `bulk_mb` MiB to
  `bulk_to`, which answers with the SHA-256 of what arrived (large-payload test);
- `fail_party`: that party raises a ProtocolError in the hold phase (abort-propagation test).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time

from fedanon.data.table import EncodedTable
from fedanon.errors import PeerError, ProtocolError
from fedanon.protocols.kit.api import RoleContext, RoleOutcome

NONCE_BYTES = 32


def _exchange(ctx: RoleContext, others: list[str]) -> dict[str, float]:
    t = ctx.transport
    nonces = {p: os.urandom(NONCE_BYTES) for p in others}
    sent_at: dict[str, float] = {}
    for p in others:
        sent_at[p] = time.perf_counter()
        t.send(p, "check/nonce", nonces[p])
    for p in others:
        got = t.receive(p, "check/nonce")
        if len(got) != NONCE_BYTES:
            raise ProtocolError(f"{ctx.me}: party {p!r} sent a malformed check nonce ({len(got)} bytes)")
        t.send(p, "check/echo", got)
    rtt: dict[str, float] = {}
    for p in others:
        echo = t.receive(p, "check/echo")
        if not hmac.compare_digest(echo, nonces[p]):
            raise ProtocolError(f"{ctx.me}: party {p!r} echoed a different nonce: channel not intact")
        rtt[p] = time.perf_counter() - sent_at[p]
    return rtt


def _bulk(ctx: RoleContext, options: dict) -> dict[str, float]:
    mib = float(options.get("bulk_mb", 0))
    source, sink = options.get("bulk_from"), options.get("bulk_to")
    if mib <= 0 or ctx.me not in (source, sink):
        return {}
    t = ctx.transport
    if ctx.me == source:
        block = os.urandom(1 << 20)
        payload = block * int(mib) + block[: int((mib % 1) * (1 << 20))]
        digest = hashlib.sha256(payload).digest()
        t0 = time.perf_counter()
        t.send(sink, "check/bulk", payload)
        del payload
        answer = t.receive(sink, "check/bulk-digest")
        elapsed = time.perf_counter() - t0
        if not hmac.compare_digest(answer, digest):
            raise ProtocolError(f"{ctx.me}: bulk payload arrived corrupted at {sink!r}")
        return {"bulk_seconds": elapsed, "bulk_mib_per_s": mib / elapsed if elapsed else 0.0}
    payload = t.receive(source, "check/bulk")
    received = len(payload)
    digest = hashlib.sha256(payload).digest()
    del payload
    t.send(source, "check/bulk-digest", digest)
    return {"bulk_bytes_received": float(received)}


def _hold(ctx: RoleContext, others: list[str], seconds: float) -> None:
    """Wait `seconds` inside `receive` (for a message nobody sends), so an abort or a dead peer ends the wait."""
    t0 = time.monotonic()
    try:
        ctx.transport.receive(others[0], "check/hold", timeout=seconds)
    except PeerError:
        if time.monotonic() - t0 < seconds * 0.99:
            raise  # aborted or a peer died, not the planned end of the hold


def run_check(ctx: RoleContext) -> RoleOutcome:
    options = ctx.settings.options or {}
    others = [p for p in ctx.settings.parties if p != ctx.me]
    report: dict[str, object] = {}
    with ctx.transport.in_phase("check"):
        rtt = _exchange(ctx, others)
    report["rtt_ms"] = {p: round(s * 1000, 3) for p, s in rtt.items()}
    if options.get("bulk_mb"):
        with ctx.transport.in_phase("bulk"):
            report.update(_bulk(ctx, options))
    hold = float(options.get("hold_s", 0) or 0)
    holders = options.get("hold_parties") or list(ctx.settings.parties)
    if hold > 0:
        with ctx.transport.in_phase("hold"):
            if ctx.me == options.get("fail_party"):
                raise ProtocolError(f"{ctx.me}: diagnostic failure requested by option fail_party")
            if ctx.me in holders:
                _hold(ctx, others, hold)
            for p in others:
                ctx.transport.send(p, "check/done", b"done")
            for p in others:
                ctx.transport.receive(p, "check/done")
    outcome = RoleOutcome(report=report)
    if ctx.me == ctx.settings.result_recipient:
        # A tiny "result" so the whole output path (recipient -> coordinator -> CSV) is exercised too.
        outcome.output = EncodedTable.from_rows(["party", "peer", "rtt_ms"],
                                                [[ctx.me, p, f"{rtt[p] * 1000:.3f}"] for p in others])
    return outcome


ROLES = {"primary": run_check, "helper": run_check}
