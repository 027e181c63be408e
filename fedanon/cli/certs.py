"""`fedanon certs init|issue|revoke`: a run CA, one certificate per party or coordinator, a revocation list."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("certs", help="create a run CA and issue party certificates")
    sub = parser.add_subparsers(dest="certs_command", metavar="ACTION", required=True)

    init = sub.add_parser("init", help="create a run CA (EC P-256) in DIR")
    init.add_argument("--dir", required=True, type=Path, help="directory for ca.crt / ca.key")
    init.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    init.add_argument("--force", action="store_true", help="replace an existing CA")
    init.set_defaults(handler=_init)

    issue = sub.add_parser("issue", help="issue NAME.crt / NAME.key signed by the run CA in DIR")
    issue.add_argument("name", help="party or coordinator name (becomes CN and DNS SAN)")
    issue.add_argument("--dir", required=True, type=Path, help="directory holding the run CA")
    issue.add_argument("--host", action="append", default=[], help="listen host name or IP to add as SAN (repeatable)")
    issue.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    issue.add_argument("--force", action="store_true",
                       help="replace an existing NAME.crt / NAME.key (rotation: revoke the old certificate first)")
    issue.set_defaults(handler=_issue)

    revoke = sub.add_parser("revoke", help="add a certificate's SHA-256 fingerprint to a revocation list "
                                           "(hand the list to every party and coordinator: [tls] revoked)")
    revoke.add_argument("cert", type=Path, help="the certificate to revoke (NAME.crt)")
    revoke.add_argument("--list", required=True, type=Path, dest="list_path",
                        help="the revocation list to append to (created if missing)")
    revoke.set_defaults(handler=_revoke)


def _check_dir_and_days(folder: Path, days: int) -> None:
    from fedanon.errors import InputError

    if folder.exists() and not folder.is_dir():
        raise InputError(f"--dir {folder}: exists and is not a directory")
    if days < 1:
        raise InputError(f"--days must be at least 1, got {days}")


def _refuse_overwrite(folder: Path, name: str) -> None:
    """An issued certificate or key is never replaced by accident.

    Why: the old key may be deployed at a party; replacing it silently breaks that
    party at its next restart (or hands a name to whoever runs the command). Rotation
    is deliberate: `--force`, after revoking the old certificate.
    """
    from fedanon.errors import InputError

    existing = [folder / f"{name}{suffix}" for suffix in (".crt", ".key") if (folder / f"{name}{suffix}").exists()]
    if existing:
        raise InputError(f"{existing[0]}: already exists; refusing to replace the certificate and key of {name!r} "
                         f"(use --force to re-issue, after `fedanon certs revoke` of the old one)")


def _init(args: argparse.Namespace) -> int:
    from fedanon.parties.pki.certs import init_ca

    _check_dir_and_days(args.dir, args.days)
    path = init_ca(args.dir, days=args.days, force=args.force)
    print(f"run CA written: {path} (keep {args.dir / 'ca.key'} offline after issuing)")
    return 0


def _issue(args: argparse.Namespace) -> int:
    from fedanon.parties.pki.certs import issue

    _check_dir_and_days(args.dir, args.days)
    if not args.force:
        _refuse_overwrite(args.dir, args.name)
    cert, key = issue(args.dir, args.name, hosts=args.host, days=args.days)
    print(f"issued {cert} and {key} for {args.name!r}")
    return 0


def _revoke(args: argparse.Namespace) -> int:
    from fedanon.errors import InputError
    from fedanon.parties.pki.revocation import revoke

    if args.list_path.exists() and not args.list_path.is_file():
        raise InputError(f"--list {args.list_path}: exists and is not a file")
    fp, name, added = revoke(args.cert, args.list_path)
    if added:
        print(f"revoked {name!r} (SHA-256 {fp}) in {args.list_path}; every party and coordinator that lists it "
              "under [tls] revoked refuses the certificate after a restart")
    else:
        print(f"{name!r} (SHA-256 {fp}) is already on {args.list_path}")
    return 0
