"""`fedanon party serve|check-config|health --config party.toml`: this institution's party daemon."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("party", help="run a party daemon (gRPC over mutual TLS)")
    sub = parser.add_subparsers(dest="party_command", metavar="ACTION", required=True)
    serve = sub.add_parser("serve", help="serve until SIGTERM/SIGINT")
    serve.add_argument("--config", required=True, type=Path, help="party config (TOML)")
    serve.add_argument("--ready-file", type=Path, help="write the bound port here once serving (for scripts)")
    serve.add_argument("--log-level", choices=("info", "debug"), default="info",
                       help="debug adds one line per delivered message (metadata only)")
    serve.set_defaults(handler=_serve)
    check = sub.add_parser("check-config", help="validate a party config and load its data, then exit")
    check.add_argument("--config", required=True, type=Path)
    check.set_defaults(handler=_check)
    health = sub.add_parser("health", help="exit 0 if this party's daemon answers over mutual TLS as itself "
                                           "(for container and service health checks), else 1")
    health.add_argument("--config", required=True, type=Path, help="the daemon's own party config (TOML)")
    health.add_argument("--address", help="dial HOST:PORT instead of the config's listen address "
                                          "(a wildcard listen host is dialled on loopback)")
    health.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the answer (default 5)")
    health.add_argument("--quiet", "-q", action="store_true", help="print nothing when healthy")
    health.set_defaults(handler=_health)


def _serve(args: argparse.Namespace) -> int:
    from fedanon.errors import InputError
    from fedanon.parties.config import load_party_config
    from fedanon.parties.daemon import PartyDaemon
    from fedanon.parties.localdata import check_data_files
    from fedanon.parties.logs import EventLog

    if args.ready_file is not None and not args.ready_file.parent.is_dir():
        raise InputError(f"--ready-file {args.ready_file}: folder {args.ready_file.parent} does not exist")
    cfg = load_party_config(args.config)
    if cfg.data is not None:
        check_data_files(cfg.data, cfg.source)  # before listening: a missing file fails here, not every run
    daemon = PartyDaemon(cfg, log=EventLog(cfg.name, level=args.log_level))
    daemon.serve_forever(ready_file=args.ready_file)
    return 0


def _check(args: argparse.Namespace) -> int:
    """Every check `party serve` makes before serving, without serving; the first failure is the error."""
    import sys

    from fedanon.errors import InputError
    from fedanon.parties.config import load_party_config
    from fedanon.parties.daemon import check_identity, check_listen_address

    cfg = load_party_config(args.config)
    print(f"config: ok (party {cfg.name!r}, listen {cfg.listen}, peers {', '.join(cfg.peers) or '-'}, "
          f"coordinators {', '.join(cfg.coordinators) or '-'})")
    engine = cfg.engine
    print(f"engine: ok (backend {engine.backend}, workers {engine.workers}"
          f"{f', scheduler {engine.scheduler}' if engine.scheduler else ''}; used where this party runs the search)")
    check_identity(cfg)
    print(f"tls: ok (certificate for {cfg.name!r}, key matches it, signed by the CA certificate {cfg.tls.ca})")
    if cfg.tls.revoked is not None:
        print(f"revoked: ok ({len(cfg.tls.revoked_fingerprints())} certificates on {cfg.tls.revoked}, "
              "this party's own not among them)")
    try:
        check_listen_address(cfg)
        print(f"listen: ok ({cfg.listen} is free)")
    except InputError as exc:  # also what a running daemon of this config looks like
        print(f"listen: warning: {exc} (fine if this party's daemon is already running)", file=sys.stderr)
    if cfg.data is not None:
        from fedanon.parties.localdata import load_party_data

        local, removed = load_party_data(cfg.data)
        print(f"data: ok ({len(local.rows)} rows, columns {', '.join(local.columns)}, "
              f"hierarchies for {', '.join(local.hierarchies) or '-'}; "
              f"removed (identifying, no role): {', '.join(removed) or 'none'})")
    return 0


def _health(args: argparse.Namespace) -> int:
    import sys

    from fedanon.parties.config import load_party_config
    from fedanon.parties.wire.health import check_health

    cfg = load_party_config(args.config)
    result = check_health(cfg, args.address, args.timeout)
    if not result.healthy:
        print(f"fedanon party health: unhealthy: party {cfg.name!r}: {result.detail}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"healthy: party {cfg.name!r} answers at {result.address} ({result.detail}, {result.rtt_ms:.1f} ms)")
    return 0
