"""`fedanon party serve --config party.toml`: run this institution's party daemon."""

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


def _serve(args: argparse.Namespace) -> int:
    from fedanon.parties.config import load_party_config
    from fedanon.parties.daemon import PartyDaemon
    from fedanon.parties.logs import EventLog

    cfg = load_party_config(args.config)
    daemon = PartyDaemon(cfg, log=EventLog(cfg.name, level=args.log_level))
    daemon.serve_forever(ready_file=args.ready_file)
    return 0


def _check(args: argparse.Namespace) -> int:
    from fedanon.parties.config import load_party_config

    cfg = load_party_config(args.config)
    cfg.tls.read()
    print(f"party {cfg.name!r}: listen {cfg.listen}, peers {', '.join(cfg.peers) or '-'}, "
          f"coordinators {', '.join(cfg.coordinators) or '-'}")
    if cfg.data is not None:
        from fedanon.parties.localdata import load_local_data

        local = load_local_data(cfg.data)
        print(f"data: {len(local.rows)} rows, columns {', '.join(local.columns)}, "
              f"hierarchies for {', '.join(local.hierarchies) or '-'}")
    return 0
