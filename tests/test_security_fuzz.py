"""Finding 6 of issue 11, kept in the suite: fuzz every file reader and every RPC handler.

Hypothesis, seeded (`derandomize`) and bounded, so it runs in the default suite in well
under a minute. Each reader gets mutated versions of a valid file (random bytes inserted,
slices cut or repeated, non-UTF-8, NUL, deep nesting, very long lines) and must either
accept it — then its result must be well-formed, never a silently wrong reading — or fail
with `InputError` (the CLI's exit 2) in one line echoing at most ~200 characters of
content. Every RPC of a live daemon gets random requests and must answer with a clear
status (never UNKNOWN, i.e. an unhandled exception) and keep serving.
"""

from __future__ import annotations

import string
import threading
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fedanon.cli import main as cli_main
from fedanon.data.io.delimited import read_table_csv
from fedanon.data.hierarchy import Hierarchy
from fedanon.cli.kit.runconfig import _toml_settings, load_toml
from fedanon.errors import INPUT_ERROR_LIMIT, FedanonError, InputError, ProtocolError
from fedanon.parties.config import Limits, load_party_config, load_run_config
from fedanon.parties.wire.resultwire import decode_result
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty
from fedanon.parties.pki.tls import channel_options
from fedanon.proto import fedanon_pb2 as pb
from fedanon.proto import fedanon_pb2_grpc as pb_grpc
from fedanon.protocols.kit import codec

FUZZ = settings(derandomize=True, max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
ECHO_LIMIT = 200

CSV = b"age;sex;zip\n34;male;81667\n45;female;81675\n66;male;81925\n"
HIERARCHY = b"34;30-39;*\n45;40-49;*\n66;60-69;*\n"
PARTY = b"""[party]
name = "p1"
listen = "127.0.0.1:7001"
coordinators = ["coord"]
[tls]
cert = "p1.crt"
key = "p1.key"
ca = "ca.crt"
[peers]
p2 = "127.0.0.1:7002"
[data]
csv = "p1.csv"
[data.quasi_identifiers]
age = "age.csv"
[limits]
heartbeat_s = 2.0
max_payload_mib = 64
"""
RUN = b"""[run]
protocol = "B"
distribution = "horizontal"
[coordinator]
name = "coord"
cert = "c.crt"
key = "c.key"
ca = "ca.crt"
[parties.p1]
address = "127.0.0.1:7001"
role = "primary"
[parties.h]
address = "127.0.0.1:7003"
role = "helper"
[privacy]
quasi_identifiers = ["age"]
k = 2
"""
ANON = b"""input = "in.csv"
output = "out.csv"
k = 2
suppression = 0.1
metric = "loss"
[qi]
age = "age.csv"
"""


@st.composite
def mutated(draw, base: bytes) -> bytes:
    """`base` with a few edits: inserted junk (incl. NUL, invalid UTF-8, delimiters), cuts, repeats."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["insert", "cut", "repeat", "replace", "long", "nest"]))
        at = draw(st.integers(0, len(data)))
        if kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=12) | st.sampled_from(
                [b"\0", b"\xff\xfe", b";", b"\n", b"\"", b"=", b"[", b"]]", b"\r\n", b"\xc3", b"nan", b"-1", b"inf"]))
        elif kind == "cut":
            del data[at:at + draw(st.integers(1, 40))]
        elif kind == "repeat":
            data[at:at] = data[at:at + draw(st.integers(1, 60))] * draw(st.integers(2, 5))
        elif kind == "replace" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "long":
            data[at:at] = b"x" * draw(st.sampled_from([300, 5000, 100_000]))
        elif kind == "nest":
            depth = draw(st.sampled_from([50, 2000, 20_000]))
            data[at:at] = b"\nz = " + b"[" * depth + b"]" * depth + b"\n"
    return bytes(data)


def _check_error(exc: BaseException, path: Path) -> None:
    assert isinstance(exc, FedanonError), f"{type(exc).__name__} escaped: {exc!r}"[:500]
    text = str(exc)
    assert "\n" not in text and "\r" not in text, text[:300]
    assert len(text) <= INPUT_ERROR_LIMIT, f"{len(text)} characters: {text[:300]}"  # never the whole bad input


def _read(tmp: Path, name: str, content: bytes, reader):
    path = tmp / name
    path.write_bytes(content)
    try:
        return reader(path), path
    except Exception as exc:  # noqa: BLE001 - what matters is which kind of exception
        _check_error(exc, path)
        return None, path


# ---------------------------------------------------------------------------- files

@FUZZ
@given(content=mutated(CSV))
def test_csv_reader(tmp_path: Path, content: bytes) -> None:
    result, _ = _read(tmp_path, "data.csv", content, read_table_csv)
    if result is not None:
        header, rows = result
        assert header and all(len(r) == len(header) for r in rows)  # ragged input is never accepted


@FUZZ
@given(content=mutated(HIERARCHY))
def test_hierarchy_reader(tmp_path: Path, content: bytes) -> None:
    result, _ = _read(tmp_path, "h.csv", content, lambda p: Hierarchy.read_csv(p, "age"))
    if result is not None:
        assert len({len(r) for r in result.rows}) == 1  # one height for every value


@FUZZ
@given(content=mutated(PARTY))
def test_party_config_reader(tmp_path: Path, content: bytes) -> None:
    result, _ = _read(tmp_path, "party.toml", content, load_party_config)
    if result is not None:
        assert result.name and isinstance(result.limits.heartbeat_s, float)
        result.limits.validate()


@FUZZ
@given(content=mutated(RUN))
def test_run_config_reader(tmp_path: Path, content: bytes) -> None:
    result, _ = _read(tmp_path, "run.toml", content, load_run_config)
    if result is not None:
        assert len(result.parties) >= 2 and result.result_recipient in {p.name for p in result.parties}


@FUZZ
@given(content=mutated(ANON))
def test_anonymize_run_file_reader(tmp_path: Path, content: bytes) -> None:
    _read(tmp_path, "anon.toml", content, lambda p: _toml_settings(load_toml(p), p))


@pytest.mark.parametrize("name, content", [
    ("deep.toml", b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"),
    ("latin1.toml", "name = \"Zürich\"\n".encode("latin-1")),
    ("nul.toml", b"input = \"in\\u0000.csv\"\noutput = \"o.csv\"\n"),
    ("ragged.csv", b"a;b\n" + b"1;" * 200_000 + b"\n"),
    ("tall.csv", b";".join([b"v"] * 40_000) + b"\n"),
])
def test_known_bad_files_give_one_short_line_and_exit_2(tmp_path: Path, capsys, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    if name.endswith(".toml"):
        argv = ["anonymize", "--config", str(path)]
    elif name == "tall.csv":  # a hierarchy with 40,000 levels
        (tmp_path / "in.csv").write_text("v\nv\n")
        argv = ["anonymize", str(tmp_path / "in.csv"), "--qi", f"v={path}", "--k", "1", "-o", str(tmp_path / "o.csv")]
    else:
        argv = ["anonymize", str(path), "--qi", f"a={path}", "--k", "2", "-o", str(tmp_path / "o.csv")]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert len(err) <= ECHO_LIMIT + 150 + len(str(path)), err[:400]


# ---------------------------------------------------------------------------- wire decoders

@FUZZ
@given(blob=st.binary(max_size=300) | mutated(codec.encode_table_parts(["a"], __import__("numpy").zeros((2, 1), "int32"),
                                                                     [[b"x"]])))
@example(blob=b'\x1d FTB2\x02\x00\x00\x00\x01\r\x040\x00\x01\x00\x00\x00\x01\x00\x00\x00\x00\x01\x00\x00')
def test_payload_decoders_raise_protocol_errors_only(blob: bytes) -> None:
    for decode in (lambda b: codec.unpack_message(b, "m"), lambda b: codec.decode_table(b, "t"),
                   lambda b: codec.decode_hierarchy(b, "h"), decode_result, lambda b: codec.decode_flags(b, "f")):
        try:
            decode(blob)
        except ProtocolError as exc:
            assert len(str(exc)) < 400
        except FedanonError as exc:
            raise AssertionError(f"unexpected {type(exc).__name__}: {exc}") from None


# ---------------------------------------------------------------------------- RPC handlers

@pytest.fixture(scope="module")
def daemon():
    with SimulatedNetwork([SimulatedParty("p1", "primary"), SimulatedParty("p2", "helper")],
                          limits=Limits(idle_stream_s=2.0)) as net:
        stubs, channels = {}, []
        for caller in ("coordinator", "p2"):
            cert, key, ca = net.tls(caller).read()
            creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
            ch = grpc.secure_channel(net.address("p1"), creds, options=channel_options(Limits(), "p1"))
            channels.append(ch)
            stubs[caller] = pb_grpc.PartyStub(ch)
        yield net, stubs
        for ch in channels:
            ch.close()


TEXT = st.text(max_size=40) | st.sampled_from(["p1", "p2", "coordinator", "primary", "helper", "B", "CHECK",
                                               "horizontal", "{}", "[]", '{"k": 2}', "\0", "x" * 5000])


def _call(fn, *args) -> None:
    try:
        result = fn(*args, timeout=10)
        if hasattr(result, "__iter__") and not isinstance(result, (bytes, str)):
            for _ in zip(range(50), result):
                pass
    except grpc.RpcError as exc:
        assert exc.code() != grpc.StatusCode.UNKNOWN, exc.details()[:300]  # UNKNOWN = an exception escaped
        assert "internal error" not in (exc.details() or ""), exc.details()[:300]  # caught, but not understood
        assert len(exc.details() or "") < 600, exc.details()[:300]


@FUZZ
@given(run_id=TEXT, nonce=st.binary(max_size=80), protocol=TEXT, distribution=TEXT, recipient=TEXT,
       parties=st.lists(st.tuples(TEXT, TEXT), max_size=4), config=TEXT, options=TEXT, reason=TEXT,
       caller=st.sampled_from(["coordinator", "p2"]))
def test_rpc_handlers_answer_clearly_and_keep_serving(daemon, run_id, nonce, protocol, distribution, recipient,
                                                     parties, config, options, reason, caller) -> None:
    _net, stubs = daemon
    stub = stubs[caller]
    _call(stub.Ping, pb.PingRequest(run_id=run_id, nonce=nonce))
    request = pb.RunRequest(run_id=run_id, protocol=protocol, distribution=distribution, result_recipient=recipient,
                            parties=[pb.PartyRole(name=n, role=r) for n, r in parties], config_json=config,
                            options_json=options)
    _call(stub.Prepare, request)
    _call(stub.Start, pb.StartRequest(run_id=run_id))
    _call(stub.Abort, pb.AbortRequest(run_id=run_id, origin=caller, reason=reason))


@FUZZ
@given(chunks=st.lists(st.builds(pb.Chunk, run_id=TEXT, sender=TEXT, topic=TEXT,
                                 total_size=st.integers(0, 2**64 - 1), data=st.binary(max_size=64)), max_size=4))
def test_deliver_handler_answers_clearly(daemon, chunks) -> None:
    _net, stubs = daemon
    _call(stubs["p2"].Deliver, iter(chunks))


@FUZZ
@given(chunk=st.builds(pb.Chunk, run_id=TEXT, sender=TEXT, topic=TEXT, total_size=st.integers(0, 2**64 - 1),
                       data=st.binary(max_size=64)))
def test_post_handler_answers_clearly(daemon, chunk) -> None:
    _net, stubs = daemon
    _call(stubs["p2"].Post, chunk)


def test_daemon_still_serves_after_fuzzing(daemon) -> None:
    _net, stubs = daemon
    assert stubs["coordinator"].Ping(pb.PingRequest(), timeout=5).name == "p1"
