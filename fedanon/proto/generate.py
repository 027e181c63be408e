"""Regenerate the protobuf/gRPC modules from `fedanon.proto`: `python3 -m fedanon.proto.generate`.

The generated modules are committed so that a user needs no code generator at
install time; `tests/test_net_proto.py` regenerates into a temporary directory
and fails when the committed files are stale (edited .proto, other grpcio-tools).
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PROTO_NAME = "fedanon.proto"
GENERATED = ("fedanon_pb2.py", "fedanon_pb2_grpc.py")


def generate(out_dir: Path) -> list[Path]:
    """Run protoc (from grpcio-tools) into `out_dir` and make the gRPC module import package-relative."""
    try:
        from grpc_tools import protoc
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit("grpcio-tools is needed to generate code: pip install -e '.[test]'") from exc
    import importlib.resources

    include = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        rc = protoc.main([
            "grpc_tools.protoc",
            f"-I{PROTO_DIR}",
            f"-I{include}",
            f"--python_out={tmp}",
            f"--grpc_python_out={tmp}",
            str(PROTO_DIR / PROTO_NAME),
        ])
        if rc != 0:
            raise SystemExit(f"protoc failed with exit code {rc}")
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for name in GENERATED:
            text = (Path(tmp) / name).read_text()
            # protoc emits a top-level import; inside the fedanon package it must be absolute.
            text = re.sub(r"^import fedanon_pb2 as", "from fedanon.proto import fedanon_pb2 as", text, flags=re.M)
            target = out_dir / name
            target.write_text(text)
            written.append(target)
    return written


def main() -> int:
    for path in generate(PROTO_DIR):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
