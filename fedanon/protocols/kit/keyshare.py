"""Column keys the primaries share and the helper relays without being able to read them.

Used by the helper-based protocols (B and C, the same code and wire contexts): every primary announces an X25519 key (bound to its
TLS certificate by a signature when the transport has one), the leader draws the column
keys and seals a bundle for each other primary, and the helper only forwards sealed
bytes. `verified_publics` fails closed: with a CA at hand, a key without a valid binding
to the peer's certificate is refused, so a helper cannot swap in its own key.
"""

from __future__ import annotations

from fedanon.crypto.keyagreement import KeyAgreementIdentity, sign_public_key, verify_public_key
from fedanon.errors import ProtocolError
from fedanon.protocols.kit import codec
from fedanon.protocols.kit.api import RoleContext
from fedanon.protocols.kit.roles import DataHolder, Hello, Roster
from fedanon.protocols.kit.transport import Transport

TLS = tuple[bytes, bytes, bytes]  # (certificate PEM, key PEM, CA PEM)


def tls_identity(ctx: RoleContext, protocol: str) -> TLS | None:
    """This party's TLS identity, to bind its key-agreement key; fail closed without one.

    A transport that can carry a man in the middle (`requires_key_binding`, e.g. gRPC)
    must give us our identity: without it we could neither sign our key nor check the
    others', and the relaying helper could read every column key. The in-memory
    transport (one process) is exempt.
    """
    tls: TLS | None = getattr(ctx.transport, "tls_identity", None)
    if tls is None and getattr(ctx.transport, "requires_key_binding", True):
        raise ProtocolError(f"party {ctx.me!r} cannot bind its key-agreement key: the transport "
                            f"provides no TLS identity; refusing to run Protocol {protocol} unauthenticated")
    return tls


class KeySharingPrimary(DataHolder):
    """A data holder of a helper protocol (B, C): its helper, the key leader, and its key-agreement
    identity bound to its TLS certificate -- what both protocols' primaries hold before the hello."""

    def __init__(self, ctx: RoleContext, protocol: str) -> None:
        super().__init__(ctx)
        if not self.settings.helpers:
            raise ProtocolError(f"Protocol {protocol} needs a helper party, but the run names none")
        self.helper = self.settings.helpers[0]
        self.leader = self.settings.primaries[0]  # draws the shared column keys
        self.identity = KeyAgreementIdentity.generate(self.me)
        self.tls = tls_identity(ctx, protocol)  # fails closed where the transport should carry one


def binding_context(protocol: str, run_id: str) -> bytes:
    return f"fedanon/{protocol}/v1/x25519-binding/".encode() + run_id.encode("utf-8")


def keys_context(protocol: str, run_id: str) -> bytes:
    return f"fedanon/{protocol}/v1/column-keys/".encode() + run_id.encode("utf-8")


def bind_hello(hello: Hello, identity: KeyAgreementIdentity, tls: TLS | None, protocol: str, run_id: str) -> None:
    """Put our X25519 key into the hello, signed with our TLS key when we have one."""
    hello.public_key = identity.public_bytes().hex()
    if tls is not None:
        cert_pem, key_pem, _ca = tls
        hello.public_key_signature = sign_public_key(key_pem, identity.public_bytes(),
                                                     binding_context(protocol, run_id)).hex()
        hello.certificate = cert_pem.decode("ascii")


def roster_bindings(hellos: dict[str, Hello]) -> dict[str, dict[str, str]]:
    """What the helper copies into the roster so every primary can check every key."""
    return {p: {"signature": h.public_key_signature, "certificate": h.certificate}
            for p, h in hellos.items() if h.public_key_signature}


def verified_publics(me: str, roster: Roster, tls: TLS | None, protocol: str, run_id: str) -> dict[str, bytes]:
    """The primaries' X25519 keys; each checked against its certificate when we have a CA."""
    publics = {p: bytes.fromhex(k) for p, k in roster.public_keys.items()}
    if tls is None:
        return publics
    for party, public in publics.items():
        if party == me:
            continue
        binding = roster.bindings.get(party)
        if not binding:
            raise ProtocolError(f"party {party!r} did not bind its key-agreement key to its TLS certificate; "
                                "refusing to share column keys with it")
        verify_public_key(binding["certificate"].encode("ascii"), tls[2], party, public,
                          bytes.fromhex(binding["signature"]), binding_context(protocol, run_id))
    return publics


def send_bundles(identity: KeyAgreementIdentity, transport: Transport, helper: str, publics: dict[str, bytes],
                 bundles: dict[str, dict[str, bytes]], topic: str, context: bytes) -> None:
    """Leader: seal one bundle per primary and hand it to the helper (topic + '/' + party)."""
    for party, bundle in bundles.items():
        sealed = identity.seal(party, publics[party], codec.pack_message(bundle), context)
        transport.send(helper, f"{topic}/{party}", sealed)


def receive_bundle(identity: KeyAgreementIdentity, transport: Transport, helper: str, leader: str,
                   publics: dict[str, bytes], topic: str, context: bytes) -> dict[str, bytes]:
    """Another primary: open the leader's bundle the helper relayed."""
    sealed = transport.receive(helper, topic)
    return codec.unpack_message(identity.open(leader, publics[leader], sealed, context), "column-key bundle")
