"""A deliberately malicious helper daemon for the key-binding test (not a test module).

Runs `fedanon party serve` unchanged, except that the helper's transport replaces
primary p2's X25519 public key in the roster it relays with a key of its own -- the
man-in-the-middle that the key binding to TLS certificates must catch.
"""

from __future__ import annotations

import json
import sys

from fedanon.cli import main
from fedanon.crypto.keyagreement import KeyAgreementIdentity
from fedanon.parties.wire.grpc_transport import GrpcTransport
from fedanon.protocols.kit import codec

VICTIM = "p2"
_honest_send = GrpcTransport.send
_attacker = KeyAgreementIdentity.generate(VICTIM)


def _swapping_send(self: GrpcTransport, to: str, topic: str, payload: bytes) -> None:
    if topic == "b/roster":
        parts = codec.unpack_message(payload)
        control = json.loads(parts["control"])
        if control.get("ok") and VICTIM in control.get("public_keys", {}):
            control["public_keys"][VICTIM] = _attacker.public_bytes().hex()
            parts["control"] = json.dumps(control).encode()
            payload = codec.pack_message(parts)
    _honest_send(self, to, topic, payload)


GrpcTransport.send = _swapping_send  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
