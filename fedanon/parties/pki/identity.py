"""The identity rule of the party network: a certificate's CN *is* the party name.

Why a module of its own: gRPC checks a server only against the DNS SANs of its
certificate (the TLS target name), and a client only by what the server reads from
the auth context. A run-CA certificate with CN `mallory` and SAN `DNS:clinic-b`
would therefore pass as server "clinic-b". fedanon closes that in three places:

* `certs issue` refuses SANs that are another party's name or no host name/address
  (`check_host`), so the run CA never signs such a certificate;
* a daemon refuses callers whose certificate names another known party in a SAN
  (`foreign_names`), and refuses to start with such a certificate itself;
* a caller verifies the server it dialled by CN: the `Ping` with a nonce returns the
  server's certificate and a signature, made with the certificate's key, over
  (server name, caller name, nonce) — `verify_identity`. The caller's name is the CN
  the server saw on the TLS connection, so a relay by another party (whose own CN the
  real server would see) cannot produce a valid answer.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
from typing import Collection, Iterable

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID

from fedanon.errors import InputError, PeerError

NONCE_BYTES = 32
_CONTEXT = b"fedanon/identity/v1"
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def fingerprint(cert: x509.Certificate | bytes) -> str:
    """SHA-256 over the certificate's DER encoding, lower-case hex (PEM bytes or a loaded certificate)."""
    if isinstance(cert, (bytes, bytearray)):
        cert = x509.load_pem_x509_certificate(bytes(cert))
    return cert.fingerprint(hashes.SHA256()).hex()


def new_nonce() -> bytes:
    return os.urandom(NONCE_BYTES)


def common_name(cert: x509.Certificate) -> str:
    attrs = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(attrs[0].value) if attrs else ""


def dns_names(cert: x509.Certificate) -> list[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return [str(n) for n in ext.value.get_values_for_type(x509.DNSName)]


def foreign_names(own: str, sans: Iterable[str], known: Iterable[str]) -> list[str]:
    """SAN entries of `own`'s certificate that are the name of another known party."""
    others = {k.lower() for k in known if k.lower() != own.lower()}
    return sorted({s for s in sans if s.lower() in others})


def is_host(value: str) -> bool:
    """An IP address or an RFC 1123 host name (no wildcard, no URL, no spaces)."""
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        pass
    if not value or len(value) > 253 or value.endswith("."):
        return False
    return all(_LABEL.match(label) for label in value.split("."))


def check_host(host: str, name: str, other_parties: Iterable[str]) -> str:
    """A `--host` for `name`'s certificate: an address or host name that names no other party."""
    if not is_host(host):
        raise InputError(f"--host {host[:80]!r} is neither an IP address nor a host name")
    if host.lower() != name.lower() and host.lower() in {o.lower() for o in other_parties}:
        raise InputError(
            f"--host {host!r} is the name of another party: a certificate for {name!r} may only name {name!r} "
            "(peers would accept it as that party)"
        )
    return host


def _payload(server: str, caller: str, nonce: bytes) -> bytes:
    s, c = server.encode(), caller.encode()
    return b"|".join([_CONTEXT, len(s).to_bytes(2, "big") + s, len(c).to_bytes(2, "big") + c, nonce])


def sign_identity(key_pem: bytes, server: str, caller: str, nonce: bytes) -> bytes:
    key = serialization.load_pem_private_key(key_pem, password=None)
    data = _payload(server, caller, nonce)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.sign(data, ec.ECDSA(hashes.SHA256()))
    if isinstance(key, rsa.RSAPrivateKey):
        return key.sign(data, padding.PKCS1v15(), hashes.SHA256())
    raise InputError("TLS key must be an EC or RSA key")


def verify_identity(cert_pem: bytes, signature: bytes, *, expected: str, caller: str, nonce: bytes,
                    ca_pem: bytes, known: Iterable[str] = (), where: str = "",
                    revoked: Collection[str] = frozenset()) -> None:
    """PeerError unless the answer proves that the daemon at `where` is party `expected`.

    `revoked`: fingerprints of the consortium's revocation list (`parties/revocation.py`);
    a certificate on it is refused even though the run CA signed it and its CN is right.
    """
    at = f" at {where}" if where else ""
    if not cert_pem or not signature:
        raise PeerError(f"the daemon{at} did not prove that it is party {expected!r} (no identity in its Ping reply)")
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        ca = x509.load_pem_x509_certificate(ca_pem)
        cert.verify_directly_issued_by(ca)
    except Exception:  # noqa: BLE001 - unreadable or foreign: same meaning for the user
        raise PeerError(f"the daemon{at} presented a certificate not signed by the run CA") from None
    now = dt.datetime.now(dt.timezone.utc)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        raise PeerError(f"the daemon{at} presented an expired or not yet valid certificate")
    cn = common_name(cert)
    if revoked and fingerprint(cert) in revoked:
        raise PeerError(f"the daemon{at} presented a revoked certificate for {cn!r} (it is on the revocation list; "
                        "refusing to talk to it)")
    if cn != expected:
        raise PeerError(f"the daemon{at} is {cn!r}, not {expected!r} (its certificate's CN; refusing to talk to it)")
    foreign = foreign_names(cn, dns_names(cert), known)
    if foreign:
        raise PeerError(f"the certificate of {cn!r}{at} also names other parties {foreign}: refused")
    key = cert.public_key()
    data = _payload(expected, caller, nonce)
    try:
        if isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
        elif isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, data, padding.PKCS1v15(), hashes.SHA256())
        else:
            raise InvalidSignature()
    except InvalidSignature:
        raise PeerError(f"the daemon{at} could not prove that it holds the key of {expected!r}") from None
