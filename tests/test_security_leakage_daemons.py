"""Finding 8 (and 2) of issue 11: leakage over real daemons, for successful and failed runs.

`tests/test_leakage.py` checks protocol payloads in memory. This test runs Protocols A, B
and C (horizontal, and vertical on a second network) between real party daemons (one
process each, gRPC over mutual TLS on loopback) through the `fedanon run` CLI, and scans
everything that leaves a party other than its own log and its own files:

* the run requests and every event of the coordinator's Start streams (a gRPC interceptor
  records them), the coordinator's stdout/stderr and its exception text,
* Ping replies for the run from every party (what each tells the others about a failure),
* every log line and every file of the other parties, the written result and report.json,

for a successful run of each protocol and split, a failure injected at each party in each
phase it goes through (run option `fault_injection`, whose private message holds the
party's data path and first row; every protocol, horizontally and vertically), a local
check failure (a value missing from p2's hierarchy; every protocol, horizontally) and a
hierarchy conflict (B). Protocol C runs with ElGamal counters (fast key
generation); Protocol A has no helper (the helper daemon stays up, outside the run).

Canaries are p2's non-ASCII QI values (generalized away by 2-anonymity, so they may appear
nowhere outside p2), every party's data/config path and p2's TLS private key, searched for
as UTF-8, JSON (escaped and not), hex, base64 (every alignment) and Python bytes reprs.
Before the fix the local check failure put the value and p2's absolute path into the abort
message, the Ping detail and the coordinator output.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest
import tomli_w

from fedanon.cli import main as cli_main
from fedanon.parties import coordinator as coordinator_module
from fedanon.parties.config import run_config_dict
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty
from fedanon.parties.pki.tls import channel_options
from fedanon.proto import fedanon_pb2 as pb
from fedanon.proto import fedanon_pb2_grpc as pb_grpc

PHASES = ["encrypt", "integrate", "anonymize", "decrypt"]
#: the options each protocol runs with here (B sends only the hierarchy rows its data uses)
OPTIONS: dict[str, dict[str, Any]] = {"A": {}, "B": {"hierarchy_scope": "data"}, "C": {"counters": "elgamal"}}
CITIES_P2 = [f"Ærøskøbing-Ω{i}-ß✓" for i in range(12)]  # unique per row: level 0 is never 2-anonymous
MISSING = "Ünlisted-Łódź-⚑"


def _forms(text: str) -> list[bytes]:
    raw = text.encode("utf-8")
    out = {raw, json.dumps(text).encode()[1:-1], raw.hex().encode(), repr(raw)[2:-1].encode(),
           text.encode("unicode_escape")}
    for pad in range(3):  # base64 of the value wherever it sits in a longer blob
        enc = base64.b64encode(bytes(pad) + raw)
        skip = (pad * 4 + 2) // 3
        out.add(enc[skip + 1:-4] if pad else enc[:-4])
        out.add(base64.urlsafe_b64encode(bytes(pad) + raw)[skip + 1:-4] if pad
                else base64.urlsafe_b64encode(raw)[:-4])
    return [f for f in out if len(f) >= 8]


def _write_share(folder: Path, rows: list[tuple[Any, ...]], city_rules: dict[str, str],
                 header: tuple[str, ...] = ("age", "city", "diagnosis")) -> SimulatedParty:
    """One party's folder: data.csv with `header`, and the hierarchies of the QIs it holds."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.csv").write_text(";".join(header) + "\n" + "".join(";".join(map(str, r)) + "\n" for r in rows),
                                     encoding="utf-8")
    hierarchies = {}
    if "age" in header:
        (folder / "age.csv").write_text("".join(f"{a};{a // 10 * 10}-{a // 10 * 10 + 9};*\n" for a in range(20, 70)))
        hierarchies["age"] = folder / "age.csv"
    if "city" in header:
        (folder / "city.csv").write_text("".join(f"{c};{r};*\n" for c, r in city_rules.items()), encoding="utf-8")
        hierarchies["city"] = folder / "city.csv"
    return SimulatedParty(folder.name.split("-")[0], "primary", csv_path=folder / "data.csv",
                          qi_hierarchies=hierarchies, sensitive={"diagnosis": None} if "diagnosis" in header else {},
                          tid_column="id" if "id" in header else None)


class Recorder(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Keeps the bytes of every request and response the coordinator exchanges."""

    def __init__(self) -> None:
        self.blobs: list[bytes] = []

    def _keep(self, message: Any) -> None:
        if hasattr(message, "SerializeToString"):
            self.blobs.append(message.SerializeToString())

    def intercept_unary_unary(self, continuation, details, request):
        self._keep(request)
        call = continuation(details, request)
        try:
            self._keep(call.result())
        except grpc.RpcError as exc:
            self.blobs.append(str(exc.details()).encode())
        return call

    def intercept_unary_stream(self, continuation, details, request):
        self._keep(request)
        return _Recording(continuation(details, request), self)


class _Recording:
    def __init__(self, call: Any, recorder: Recorder) -> None:
        self._call, self._recorder = call, recorder

    def __iter__(self):
        return self

    def __next__(self):
        try:
            message = next(self._call)
        except grpc.RpcError as exc:
            self._recorder.blobs.append(str(exc.details()).encode())
            raise
        self._recorder._keep(message)
        return message

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("leak")
    p1_rows = [(20 + i, ["Berlin", "Hamburg"][i % 2], ["flu", "cold"][i % 2]) for i in range(12)]
    p2_rows = [(20 + i, CITIES_P2[i], ["cold", "flu"][i % 2]) for i in range(12)]
    p1 = _write_share(base / "p1-Ñandú-secret", p1_rows, {"Berlin": "North", "Hamburg": "North"})
    p2 = _write_share(base / "p2-Škoda-secret-⚑", p2_rows,
                      {c: ("South" if i % 2 else "North") for i, c in enumerate(CITIES_P2)})
    with SimulatedNetwork([p1, p2, SimulatedParty("helper", "helper")]) as net:
        yield net, base, {"p1": p1, "p2": p2}


@pytest.fixture(scope="module")
def vworld(tmp_path_factory):
    """Vertical split of the same kind of data: p1 holds age and diagnosis, p2 the cities; `id` joins them."""
    base = tmp_path_factory.mktemp("vleak")
    ids = [f"r{i:02d}" for i in range(12)]
    p1 = _write_share(base / "p1-Ñandú-secret", [(ids[i], 20 + i, ["flu", "cold"][i % 2]) for i in range(12)], {},
                      header=("id", "age", "diagnosis"))
    p2 = _write_share(base / "p2-Škoda-secret-⚑", [(ids[i], CITIES_P2[i]) for i in range(12)],
                      {c: ("South" if i % 2 else "North") for i, c in enumerate(CITIES_P2)}, header=("id", "city"))
    with SimulatedNetwork([p1, p2, SimulatedParty("helper", "helper")]) as net:
        yield net, base, {"p1": p1, "p2": p2}


def _canaries(net: SimulatedNetwork, parties: dict[str, SimulatedParty]) -> dict[str, list[str]]:
    key_body = "".join(net.tls("p2").key.read_text().splitlines()[1:-1])
    return {
        "p1": [str(parties["p1"].csv_path.parent), str(net.config_paths["p1"])],
        "p2": [*CITIES_P2, MISSING, str(parties["p2"].csv_path.parent), str(net.config_paths["p2"]), key_body[8:60]],
        "helper": [str(net.config_paths["helper"])],
    }


def _run(net: SimulatedNetwork, tmp: Path, monkeypatch, capsys, options: dict[str, Any], protocol: str = "B",
         distribution: str = "horizontal") -> tuple[int, list[tuple[str, str, bytes]]]:
    recorder = Recorder()
    real_open = coordinator_module.open_channel
    monkeypatch.setattr(coordinator_module, "open_channel",
                        lambda *a, **k: grpc.intercept_channel(real_open(*a, **k), recorder))
    cfg = net.run_config(protocol, distribution, {"quasi_identifiers": ["age", "city"], "k": 2, "suppression": 0.0,
                                                  "metric": "loss"}, "p1", {**OPTIONS[protocol], **options})
    if protocol == "A":  # a ring of primaries: the helper daemon is not part of the run
        cfg.parties = [p for p in cfg.parties if p.role != "helper"]
    cfg.output, cfg.report = tmp / "result.csv", tmp / "report.json"
    run_id = f"leak-{uuid.uuid4().hex}"
    cfg.run_id = run_id
    toml = tmp / "run.toml"
    toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
    code = cli_main(["run", "--config", str(toml), "--no-progress"])
    out = capsys.readouterr()
    artifacts: list[tuple[str, str, bytes]] = [("coordinator", "stdout", out.out.encode()),
                                               ("coordinator", "stderr", out.err.encode())]
    artifacts += [("coordinator", "grpc", b) for b in recorder.blobs]
    for name in [p.name for p in cfg.parties]:  # what each party says about the run to whoever asks
        cert, key, ca = net.tls("coordinator").read()
        creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
        with grpc.secure_channel(net.address(name), creds, options=channel_options(cfg.limits, name)) as ch:
            reply = pb_grpc.PartyStub(ch).Ping(pb.PingRequest(run_id=run_id), timeout=10)
        artifacts.append((f"shared-by-{name}", "ping", reply.SerializeToString()))
    for path in sorted(tmp.rglob("*")):
        if path.is_file():
            artifacts.append(("coordinator", str(path.name), path.read_bytes()))
    for path in sorted(net.dir.rglob("*")):
        if path.is_file() and "certs" not in path.parts:
            owner = path.stem.split(".")[0]
            artifacts.append((owner, path.name, path.read_bytes()))
    return code, artifacts


def _leaks(artifacts: list[tuple[str, str, bytes]], canaries: dict[str, list[str]]) -> list[str]:
    found = []
    for author, label, blob in artifacts:
        low = blob.lower()
        for owner, values in canaries.items():
            if owner == author:
                continue  # a party's own log and files may name its own values and paths
            for value in values:
                if any(form in blob or form.lower() in low for form in _forms(value)):
                    found.append(f"{owner}'s {value[:30]!r} in {author}'s {label}")
    return found


def _assert_clean(world, tmp_path: Path, monkeypatch, capsys, options: dict[str, Any], succeed: bool,
                  protocol: str = "B", distribution: str = "horizontal") -> str:
    net, _base, parties = world
    code, artifacts = _run(net, tmp_path, monkeypatch, capsys, options, protocol, distribution)
    assert (code == 0) == succeed, artifacts[:2]
    leaks = _leaks(artifacts, _canaries(net, parties))
    assert not leaks, leaks[:10]
    return b"\n".join(b for a, label, b in artifacts if label == "stderr").decode(errors="replace")


@pytest.mark.parametrize("protocol", ["A", "B", "C"])
def test_successful_run_leaks_nothing(world, tmp_path: Path, monkeypatch, capsys, protocol: str) -> None:
    _assert_clean(world, tmp_path, monkeypatch, capsys, {}, succeed=True, protocol=protocol)
    rows = (tmp_path / "result.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 25 and rows[0] == "age;city;diagnosis"  # header + 24 rows; p2's cities only generalized


@pytest.mark.parametrize("protocol", ["A", "B", "C"])
def test_successful_vertical_run_leaks_nothing(vworld, tmp_path: Path, monkeypatch, capsys, protocol: str) -> None:
    _assert_clean(vworld, tmp_path, monkeypatch, capsys, {}, succeed=True, protocol=protocol, distribution="vertical")
    rows = (tmp_path / "result.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 13 and set(rows[0].split(";")) >= {"age", "city", "diagnosis"}, rows[:2]


def _phases(protocol: str, party: str) -> list[str]:
    """The phases a party goes through (so an injected fault fires): B's and C's primaries wait
    through the helper's anonymize phase without one, except C's key holder p1, which judges in it."""
    if protocol == "A" or party == "helper" or (protocol == "C" and party == "p1"):
        return PHASES
    return [ph for ph in PHASES if ph != "anonymize"]


def _parties(protocol: str) -> list[str]:
    return ["p1", "p2"] if protocol == "A" else ["p1", "p2", "helper"]


FAULTS = [(proto, p, ph) for proto in ("A", "B", "C") for p in _parties(proto) for ph in _phases(proto, p)]


def _assert_fault_is_clean(world, tmp_path: Path, monkeypatch, capsys, protocol: str, distribution: str,
                           party: str, phase: str) -> None:
    net = world[0]
    err = _assert_clean(world, tmp_path, monkeypatch, capsys, {"fault_injection": f"{party}:{phase}"},
                        succeed=False, protocol=protocol, distribution=distribution)
    assert "fedanon run: error:" in err  # (which party the one line names can depend on timing)
    assert not (tmp_path / "result.csv").exists()
    if party == "p2":  # and the owner's own log has the detail
        log = (net.dir / "logs" / "p2.log").read_text(encoding="utf-8")
        assert "injected fault" in log and CITIES_P2[0] in log


@pytest.mark.slow
@pytest.mark.parametrize("protocol, party, phase", FAULTS)
def test_failure_injected_at_each_party_and_phase_leaks_nothing(world, tmp_path: Path, monkeypatch, capsys,
                                                                  protocol: str, party: str, phase: str) -> None:
    _assert_fault_is_clean(world, tmp_path, monkeypatch, capsys, protocol, "horizontal", party, phase)


@pytest.mark.slow
@pytest.mark.parametrize("protocol, party, phase", FAULTS)
def test_vertical_failure_injected_at_each_party_leaks_nothing(vworld, tmp_path: Path, monkeypatch, capsys,
                                                                 protocol: str, party: str, phase: str) -> None:
    _assert_fault_is_clean(vworld, tmp_path, monkeypatch, capsys, protocol, "vertical", party, phase)


@pytest.mark.parametrize("protocol", ["A", "B", "C"])
def test_local_check_failure_names_the_value_only_at_its_owner(world, tmp_path: Path, monkeypatch, capsys,
                                                               protocol: str) -> None:
    net, _base, parties = world
    data = parties["p2"].csv_path
    original = data.read_text(encoding="utf-8")
    data.write_text(original + f"33;{MISSING};flu\n", encoding="utf-8")  # not in p2's city hierarchy
    try:
        err = _assert_clean(world, tmp_path, monkeypatch, capsys, {}, succeed=False, protocol=protocol)
    finally:
        data.write_text(original, encoding="utf-8")
    assert "p2" in err and "city" in err
    own_log = (net.dir / "logs" / "p2.log").read_text(encoding="utf-8")
    assert MISSING in own_log, [line for line in own_log.splitlines() if "fail" in line][-2:]


def test_hierarchy_conflict_names_the_value_only_at_the_two_parties(world, tmp_path: Path, monkeypatch,
                                                                      capsys) -> None:
    net, _base, parties = world
    city = parties["p2"].qi_hierarchies["city"]
    original = city.read_text(encoding="utf-8")
    # p2 now also knows "Berlin", but puts it in another region than p1 does: a conflict on a shared value
    city.write_text(original + "Berlin;South;*\n", encoding="utf-8")
    data = parties["p2"].csv_path
    data_original = data.read_text(encoding="utf-8")
    data.write_text(data_original + "44;Berlin;flu\n", encoding="utf-8")
    try:
        err = _assert_clean(world, tmp_path, monkeypatch, capsys, {"hierarchy_scope": "full"}, succeed=False)
    finally:
        city.write_text(original, encoding="utf-8")
        data.write_text(data_original, encoding="utf-8")
    assert "disagree" in err and "Berlin" not in err
    for name in ("helper",):
        assert "Berlin" not in (net.dir / "logs" / f"{name}.log").read_text(encoding="utf-8")
    assert re.search("Berlin", (net.dir / "logs" / "p2.log").read_text(encoding="utf-8"))
