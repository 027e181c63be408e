"""The single `fedanon` console script.

Each subcommand lives in its own module under `fedanon.cli` and exposes
`register(subparsers)`; this dispatcher only wires them together so that
independent parts of the tool (engine, certificates, daemons, protocols) never
have to edit one shared file.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from typing import Sequence

import fedanon
from fedanon.errors import FedanonError

# Module name under fedanon.cli -> imported lazily so a slow import (gRPC) is
# paid only by the commands that need it.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "anonymize",
    "certs",
    "party",
    "run",
    "simulate",
    "demo",
    "hierarchy",
    "risk",
    "microaggregate",
    "stats",
)


class CliError(FedanonError):
    """An error in the command line itself; printed without a traceback."""


def package_version() -> str:
    """The installed distribution's version (package metadata), else the source tree's `__version__`.

    Why metadata first: it is what `pip` installed and reports; a source checkout that was
    never installed has none and falls back to the version the package itself declares.
    """
    try:
        return importlib.metadata.version("fedanon")
    except importlib.metadata.PackageNotFoundError:
        return fedanon.__version__


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line parser; with `only` (a subcommand's name) just that subcommand.

    Why `only`: registering every subcommand imports all their modules (gmpy2 and
    the crypto layer among them, ~0.1-0.3 s); `fedanon anonymize` on a table needs none of them.
    """
    parser = argparse.ArgumentParser(
        prog="fedanon",
        description="Secure distributed anonymization (protocols A/B/C) and a local Flash anonymizer.",
    )
    parser.add_argument("--version", action="version", version=f"fedanon {package_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES if only is None else (only,):
        try:
            module = importlib.import_module(f"fedanon.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"fedanon.cli.{name}":
                continue  # subcommand not built yet
            raise
        module.register(subparsers)
    return parser


def quiet_grpc_core_logs() -> None:
    """Keep gRPC's C-core log lines (e.g. `E1123 add_port.cc:83] ...`) off the terminal.

    Every failure they describe also reaches us as an exception that we turn into one
    clear line. Must run before gRPC is first imported; a user who sets GRPC_VERBOSITY
    (e.g. to debug a TLS problem) keeps it, and daemons started from here inherit it.
    """
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")


def main(argv: Sequence[str] | None = None) -> int:
    quiet_grpc_core_logs()
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words and words[0] in SUBCOMMAND_MODULES else None)
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args) or 0)
    except FedanonError as exc:
        print(f"fedanon {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file or folder the user named cannot be used: still one line
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"fedanon {args.command}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fedanon: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
