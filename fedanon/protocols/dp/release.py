"""SafePub across institutions: what a primary samples, what the search party draws.

A DP run (`config.model("dp")`) changes two things in a protocol, nothing else:

* **Sampling, at every primary, before anything is encrypted.** Horizontal split: each
  primary keeps each of its rows independently with probability β, drawing from its own
  randomness (OpenDP's source, the OS CSPRNG). Bernoulli sampling is independent per row,
  so the union of the primaries' samples is distributed exactly as a central sample of the
  pooled table. Vertical split: all parties must keep the same persons, so a person is kept
  when PRF(K, TID) < ⌊β·2⁶⁴⌋, with PRF = HMAC-SHA256 truncated to 64 bits
  (`crypto.prp.prf_uint64`) and K derived (`crypto.prp.derive_key`) from a key every primary
  holds: in B the run's release tally key, itself derived from the TID key that the helper
  never sees; in A (which has no shared key) a key the first primary draws and seals for each
  other primary under the X25519 key that primary signed with its TLS certificate
  (`deal_sampling_key`). K is fresh per run and chosen independently of the data, and TIDs are distinct, so
  the PRF's outputs are (computationally) independent uniform 64-bit numbers: every person
  is kept independently with probability β, independently of the data -- the condition of
  SafePub's privacy amplification by sampling. Only the sampled rows are encoded, encrypted
  and sent (dictionaries hold only values the sample has), and a DP hello announces no row
  count, so the helper learns the sample's size and rows, which the output reveals anyway,
  and nothing about the rows that were not sampled.
* **The search, at the party that runs the engine** (B's helper, A's master; C below), on the
  integrated ciphertext of the sample: `engine.safepub.release_sample`, the same code as
  the local release, drawing the exponential mechanism from that party's own randomness.
  The score is computed from class sizes and hierarchy leaf counts only, so it has the same
  value on ciphertext as on plaintext.

In Protocol C the helper never sees a class size, so the key holder scores and draws: the
helper sends the encrypted class sizes of one step's candidates in one message, the key
holder decrypts them, scores with the local release's code and names the drawn transformation
(`protocols/c/dp_release.py`). Which protocol supports which split is in the registry
(`ProtocolSpec.dp`).

`--seed` (tests only) gives every party its own seeded stream (`dp.randomness`, stream =
the party's name), so a distributed run can be compared with the local release on the
same sample with the same search randomness.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from fedanon.crypto.deterministic import generate_key
from fedanon.crypto.keyagreement import KeyAgreementIdentity
from fedanon.crypto.prp import derive_key, prf_uint64
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.dp.randomness import TWO_64, Randomness, randomness
from fedanon.engine.result import AnonymizationResult
from fedanon.engine.safepub import release_sample
from fedanon.model.config import AnonymizationConfig
from fedanon.errors import ProtocolError
from fedanon.protocols.kit.api import LocalData, RoleContext
from fedanon.protocols.kit.keyshare import bind_hello, tls_identity, verified_publics
from fedanon.protocols.kit.roles import Hello, Roster, mark_shared
from fedanon.protocols.registry import dp_refusal

_SAMPLE_LABEL = b"fedanon/dp-sample/v1/"
NO_LIMIT = math.nextafter(1.0, 0.0)


def dp_model(config: AnonymizationConfig) -> Any:
    """The run's DP model, or None for an ordinary (syntactic) run."""
    return config.model("dp")


def refusal(ctx: RoleContext) -> str | None:
    """Why this protocol cannot make this run's DP release (None: it can, or the run is not DP)."""
    if dp_model(ctx.settings.config) is None:
        return None
    return dp_refusal(ctx.settings.protocol, ctx.settings.distribution)


def refuse_unsupported(ctx: RoleContext) -> None:
    """Stop at every party, before any data moves, where the protocol cannot make this DP release."""
    message = refusal(ctx)
    if message:
        raise mark_shared(ProtocolError(message))


def party_randomness(config: AnonymizationConfig, party: str) -> Randomness:
    """This party's draws: OpenDP and the OS, or (tests only, with a seed) its own seeded stream."""
    return randomness(dp_model(config).seed, stream=party)


def keep_rows(config: AnonymizationConfig, party: str, n_rows: int) -> np.ndarray:
    """Horizontal split: each of this party's rows independently with probability β."""
    return party_randomness(config, party).bernoulli(n_rows, dp_model(config).parameters().beta)


def keep_persons(config: AnonymizationConfig, shared_key: bytes, protocol: str, run_id: str,
                 tids: Sequence[str]) -> np.ndarray:
    """Vertical split: keep a person when PRF(K, TID) < ⌊β·2⁶⁴⌋ (every primary decides alike)."""
    beta = dp_model(config).parameters().beta
    key = derive_key(shared_key, _SAMPLE_LABEL + protocol.encode() + b"/" + run_id.encode("utf-8"))
    draws = prf_uint64(key, b"tid", [t.encode("utf-8") for t in tids])
    threshold = math.floor(beta * TWO_64)
    if threshold >= TWO_64:
        return np.ones(len(tids), dtype=bool)
    return draws < np.uint64(threshold)


def bind_sampling_identity(ctx: RoleContext, hello: Hello, protocol: str) -> KeyAgreementIdentity:
    """A vertical run without a key all primaries already share (Protocol A): this party's
    X25519 key for receiving the sampling key, put into its hello, signed with its TLS key."""
    identity = KeyAgreementIdentity.generate(ctx.me)
    bind_hello(hello, identity, tls_identity(ctx, protocol), protocol, ctx.settings.run_id)
    return identity


def deal_sampling_key(ctx: RoleContext, identity: KeyAgreementIdentity, roster: Roster, protocol: str) -> bytes:
    """The first primary draws the sampling key and seals it for every other primary, which
    opens it; each checks the others' keys against their TLS certificates first, so the party
    that relayed the hellos (A's master) cannot put in a key of its own."""
    run_id = ctx.settings.run_id
    publics = verified_publics(ctx.me, roster, tls_identity(ctx, protocol), protocol, run_id)
    context = f"fedanon/{protocol}/v1/dp-sampling-key/".encode() + run_id.encode("utf-8")
    leader = ctx.settings.primaries[0]
    topic = f"{protocol.lower()}/dp-sampling-key"
    if ctx.me != leader:
        return identity.open(leader, publics[leader], ctx.transport.receive(leader, topic), context)
    key = generate_key()
    for party in ctx.settings.primaries:
        if party != ctx.me:
            ctx.transport.send(party, topic, identity.seal(party, publics[party], key, context))
    return key


def sampled(local: LocalData, keep: np.ndarray) -> LocalData:
    """The party's share reduced to its sampled rows (the only rows that leave it)."""
    rows = [row for row, k in zip(local.rows, keep.tolist()) if k]
    return LocalData(list(local.columns), rows, local.hierarchies, local.tid_column, None)


def search(table: EncodedTable, hierarchies: dict[str, Hierarchy], config: AnonymizationConfig, party: str,
           protocol: str) -> AnonymizationResult:
    """The search party's part: SafePub's search and k-anonymization of the integrated sample."""
    result = release_sample(table, hierarchies, config, rng=party_randomness(config, party))
    result.extra["dp"].update(search_facts(protocol, party))
    return result


def search_facts(protocol: str, party: str) -> dict[str, str]:
    """What a protocol's DP report adds to the local release's: who drew, how the rows were sampled."""
    return {
        "protocol": protocol, "search_party": party,
        "sampling": "at each primary before encryption (horizontal: Bernoulli(beta) per row from its own "
                    "randomness; vertical: keyed PRF of the TID under a key the primaries share)",
    }


def check_config(config: AnonymizationConfig) -> AnonymizationConfig:
    """What the recipient checks a DP release against: k-anonymity with the derived k and no
    suppression limit (SafePub suppresses every class below k, however many)."""
    model = dp_model(config)
    if model is None:
        return config
    k = max(model.parameters().k, int(config.k))
    # the largest limit a config accepts (below 1): the verifier's floor(limit·n + 1e-9) is n,
    # i.e. no limit, for every table of fewer than 9 million rows
    return AnonymizationConfig(config.quasi_identifiers, k=k, suppression=NO_LIMIT, metric=config.metric)
