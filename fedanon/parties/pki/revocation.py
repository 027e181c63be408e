"""Certificate revocation for a consortium: a deny-list of SHA-256 certificate fingerprints.

Why a list of fingerprints and not CRL/OCSP: the run CA is a file on the organizer's
disk, not a service; a text file that the CA operator hands to every party (like
`ca.crt`) needs no responder, works offline and names exactly one certificate, so a
party whose key was stolen keeps its name: it gets a new certificate (rotation) and
the old one goes on the list. The file holds one fingerprint per line — 64 hex digits,
colons between bytes allowed (as `openssl x509 -fingerprint -sha256` prints them) —
plus `#` comments; `fedanon certs revoke` writes the certificate's CN and the date as a
comment above each entry. Daemons refuse callers (`PartyService._authorize`) and callers
refuse servers (`identity.verify_identity`) whose certificate is on the list.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from cryptography import x509

from fedanon.errors import InputError, clip
from fedanon.parties.pki.identity import common_name, fingerprint

_HEX = re.compile(r"^[0-9a-f]{64}$")


def parse_entry(text: str) -> str | None:
    """The fingerprint on one line (None for a blank or comment line); ValueError if malformed."""
    value = text.split("#", 1)[0].strip()
    if not value:
        return None
    normalized = value.replace(":", "").lower()
    if not _HEX.match(normalized):
        raise ValueError(value)
    return normalized


def load_revoked(path: Path | None) -> frozenset[str]:
    """The fingerprints in `path` (empty without a list); InputError naming file, line and value."""
    if path is None:
        return frozenset()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read revocation list {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: revocation list is not UTF-8 text") from None
    found = set()
    for number, line in enumerate(lines, 1):
        try:
            entry = parse_entry(line)
        except ValueError as exc:
            raise InputError(f"{path}:{number}: {clip(str(exc))!r} is not a SHA-256 certificate fingerprint "
                             "(64 hex digits, colons allowed)") from None
        if entry is not None:
            found.add(entry)
    return frozenset(found)


def revoke(cert_path: Path, list_path: Path) -> tuple[str, str, bool]:
    """Append `cert_path`'s fingerprint to `list_path` (created if missing).

    Returns (fingerprint, CN, added); `added` is False when it was already on the list.
    The list is validated first, so a damaged file is reported rather than appended to.
    """
    try:
        pem = cert_path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read certificate {cert_path}: {exc.strerror}") from None
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError:
        raise InputError(f"{cert_path}: not a PEM certificate") from None
    fp = fingerprint(cert)
    name = "".join(c if c.isprintable() else "?" for c in common_name(cert))[:80]  # one comment line
    existing = load_revoked(list_path) if list_path.exists() else frozenset()
    if fp in existing:
        return fp, name, False
    old = list_path.read_bytes() if list_path.exists() else b""
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    serial = format(cert.serial_number, "x")
    entry = f"# {name} serial {serial} revoked {today}\n{fp}\n"
    with open(list_path, "a", encoding="utf-8") as out:
        if old and not old.endswith(b"\n"):
            out.write("\n")
        out.write(entry)
    return fp, name, True
