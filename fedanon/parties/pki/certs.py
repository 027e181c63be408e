"""The run CA and party certificates (EC P-256, via `cryptography`).

Every daemon pins the run CA as its only trust root and additionally checks the
peer certificate's name against its allow-list, so a certificate is both the
proof of membership in the run (signed by the CA) and the party's identity (its
CN and DNS SAN equal the party name). `issue` refuses `--host` values that are not
an address or host name or that are another issued party's name (see
`parties/identity.py`). Keys are written with mode 0600.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fedanon.errors import InputError
from fedanon.parties.pki.identity import check_host, dns_names

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def check_party_name(name: str) -> str:
    """Party names become DNS SANs and file names, so keep them to a safe alphabet."""
    if not _NAME_RE.match(name):
        raise InputError(
            f"invalid party name {name!r}: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return name


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def init_ca(directory: Path, name: str = "fedanon run CA", days: int = 365, force: bool = False) -> Path:
    """Create a fresh run CA (key + self-signed cert) in `directory`; refuse to overwrite unless `force`."""
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    if not force and (cert_path.exists() or key_path.exists()):
        raise InputError(f"{directory}: a CA already exists ({CA_CERT}/{CA_KEY}); use --force to replace it")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_key(key_path, key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path


def _load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    if not cert_path.exists() or not key_path.exists():
        raise InputError(f"{directory}: no run CA found ({CA_CERT}, {CA_KEY}); run `fedanon certs init --dir {directory}` first")
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise InputError(f"{key_path}: expected an EC private key")
    return cert, key


def issue(directory: Path, name: str, hosts: list[str] | None = None, days: int = 365) -> tuple[Path, Path]:
    """Issue `<name>.crt`/`<name>.key` signed by the CA in `directory`.

    SANs: DNS:<name> (peers dial with the party name as TLS target name, so this is
    what they verify) plus one DNS or IP entry per listen host.
    """
    check_party_name(name)
    ca_cert, ca_key = _load_ca(directory)
    others = issued_names(directory) - {name}
    for other in sorted(others):
        try:
            claimed = dns_names(x509.load_pem_x509_certificate((directory / f"{other}.crt").read_bytes()))
        except (OSError, ValueError):
            continue
        if name.lower() in {c.lower() for c in claimed}:
            raise InputError(f"{directory / (other + '.crt')}: the certificate of {other!r} already names {name!r}; "
                             f"re-issue {other!r} without --host {name} before issuing {name!r}")
    for host in hosts or []:
        check_host(host, name, others)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(name)]
    for host in hosts or []:
        try:
            entry: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            entry = x509.DNSName(host)
        if entry not in sans:
            sans.append(entry)
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key_path, cert_path = directory / f"{name}.key", directory / f"{name}.crt"
    _write_key(key_path, key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def issued_names(directory: Path) -> set[str]:
    """Names of the certificates already issued by the CA in `directory` (one `<name>.crt` each)."""
    return {p.stem for p in directory.glob("*.crt") if p.name != CA_CERT}


def certificate_name(cert_pem: bytes) -> str:
    """The CN of a PEM certificate: what peers will see as this party's identity."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    attrs = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(attrs[0].value) if attrs else ""
