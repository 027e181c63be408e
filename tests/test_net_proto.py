"""The committed gRPC/protobuf modules must be exactly what the generator produces now."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.proto import generate


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    generate.generate(tmp_path)
    for name in generate.GENERATED:
        fresh = (tmp_path / name).read_text()
        committed = (generate.PROTO_DIR / name).read_text()
        assert fresh == committed, (
            f"fedanon/proto/{name} is stale: run `python3 -m fedanon.proto.generate` and commit the result"
        )


def test_generated_modules_import_and_roundtrip() -> None:
    from fedanon.proto import fedanon_pb2, fedanon_pb2_grpc

    chunk = fedanon_pb2.Chunk(run_id="r1", sender="p1", topic="t", total_size=3, data=b"abc")
    again = fedanon_pb2.Chunk.FromString(chunk.SerializeToString())
    assert (again.sender, again.data, again.total_size) == ("p1", b"abc", 3)
    assert hasattr(fedanon_pb2_grpc, "PartyStub") and hasattr(fedanon_pb2_grpc, "add_PartyServicer_to_server")
