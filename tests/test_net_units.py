"""Unit tests of the network layer's pieces that need no running daemon."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from fedanon.cli import main as cli_main
from fedanon.data.table import EncodedTable
from fedanon.errors import InputError, PeerError
from fedanon.parties.pki import certs
from fedanon.parties.config import load_party_config, load_run_config
from fedanon.parties.coordinator import RunOutcome, _root_cause, write_outputs
from fedanon.parties.wire.inbox import RunInbox
from fedanon.parties.logs import EventLog
from fedanon.parties.wire.resultwire import decode_result, encode_result
from fedanon.protocols.registry import role_function

from datasets import DATA_DIR as DATA


def test_certs_cli_creates_ca_and_party_cert_with_sans(tmp_path: Path) -> None:
    assert cli_main(["certs", "init", "--dir", str(tmp_path)]) == 0
    assert cli_main(["certs", "issue", "clinic-a", "--dir", str(tmp_path), "--host", "10.0.0.7", "--host", "a.example"]) == 0
    cert = x509.load_pem_x509_certificate((tmp_path / "clinic-a.crt").read_bytes())
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "clinic-a"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["clinic-a", "a.example"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["10.0.0.7"]
    cert.verify_directly_issued_by(ca)  # raises if not signed by the run CA
    assert (tmp_path / "clinic-a.key").stat().st_mode & 0o077 == 0
    # a second init must not silently replace the CA every certificate depends on
    assert cli_main(["certs", "init", "--dir", str(tmp_path)]) == 2


def test_issue_without_ca_and_bad_names_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no run CA"):
        certs.issue(tmp_path, "p1")
    certs.init_ca(tmp_path)
    with pytest.raises(InputError, match="invalid party name"):
        certs.issue(tmp_path, "p1/../../etc")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_party_config_resolves_paths_and_names_errors(tmp_path: Path) -> None:
    cfg_path = _write(tmp_path / "p1.toml", """
[party]
name = "p1"
listen = "0.0.0.0:50051"
coordinators = ["coord"]
[tls]
cert = "certs/p1.crt"
key = "certs/p1.key"
ca = "certs/ca.crt"
[peers]
p2 = "10.0.0.2:50051"
[data]
csv = "data/p1.csv"
tid_column = "tid"
[data.quasi_identifiers]
age = "h/age.csv"
[data.sensitive]
diagnosis = ""
[limits]
chunk_kib = 512
""")
    cfg = load_party_config(cfg_path)
    assert cfg.tls.cert == tmp_path / "certs" / "p1.crt"
    assert cfg.peers == {"p2": "10.0.0.2:50051"} and cfg.coordinators == ["coord"]
    assert cfg.data is not None and cfg.data.quasi_identifiers["age"] == tmp_path / "h" / "age.csv"
    assert cfg.data.sensitive == {"diagnosis": None} and cfg.data.tid_column == "tid"
    assert cfg.limits.chunk_bytes == 512 * 1024

    bad = _write(tmp_path / "bad.toml", cfg_path.read_text().replace('"0.0.0.0:50051"', '"nowhere"'))
    with pytest.raises(InputError, match=r"bad\.toml.*party\.listen.*HOST:PORT"):
        load_party_config(bad)
    missing = _write(tmp_path / "missing.toml", "[party]\nname = \"p1\"\n")
    with pytest.raises(InputError, match="missing required key 'party.listen'"):
        load_party_config(missing)
    with pytest.raises(InputError, match="not valid TOML"):
        load_party_config(_write(tmp_path / "broken.toml", "[party\n"))


def test_run_config_validates_roles_and_recipient(tmp_path: Path) -> None:
    base = """
[run]
protocol = "check"
result_recipient = "{rec}"
[coordinator]
name = "coord"
cert = "c.crt"
key = "c.key"
ca = "ca.crt"
[parties.p1]
address = "127.0.0.1:1"
role = "primary"
[parties.h]
address = "127.0.0.1:2"
role = "{role}"
"""
    cfg = load_run_config(_write(tmp_path / "ok.toml", base.format(rec="p1", role="helper")))
    assert [(p.name, p.role) for p in cfg.parties] == [("p1", "primary"), ("h", "helper")]
    with pytest.raises(InputError, match="result_recipient 'zz'"):
        load_run_config(_write(tmp_path / "r.toml", base.format(rec="zz", role="helper")))
    with pytest.raises(InputError, match=r"parties\.h\.role"):
        load_run_config(_write(tmp_path / "x.toml", base.format(rec="p1", role="boss")))


def test_inbox_abort_wakes_waiter_promptly() -> None:
    inbox = RunInbox()
    inbox.put("p2", "t", b"x")
    assert inbox.take("p2", "t", 0.1) == b"x"
    assert inbox.take("p2", "t", 0.05) is None
    threading.Timer(0.2, inbox.abort, args=("party 'p3' aborted the run: boom",)).start()
    t0 = time.monotonic()
    with pytest.raises(PeerError, match="p3"):
        inbox.take("p2", "t", 30.0)
    assert time.monotonic() - t0 < 5


def test_logs_are_key_value_and_capped(tmp_path: Path) -> None:
    out = tmp_path / "log.txt"
    with open(out, "w") as fh:
        log = EventLog("p1", stream=fh)
        log("delivered", topic="b/table", bytes=12, note="two words", long="x" * 5000)
        log("hidden", level="debug", a=1)
    line = out.read_text().strip()
    assert "\n" not in line and "event=delivered" in line and 'note="two words"' in line
    assert len(line) < 600


def test_result_wire_roundtrip_and_corruption() -> None:
    back = decode_result(encode_result(EncodedTable.from_rows(["a", "b"], [["1", "*"], [b"x", "y"]])))
    assert back.columns == ["a", "b"] and back.text_rows() == [["1", "*"], ["x", "y"]]
    from fedanon.errors import ProtocolError

    with pytest.raises(ProtocolError, match="malformed"):
        decode_result(b"not snappy")


def _outcome(columns: list[str], rows: list[list[str]], report: dict | None = None) -> RunOutcome:
    return RunOutcome("r", EncodedTable.from_rows(columns, rows), report or {})


def test_outputs_are_written_atomically_and_not_on_missing_result(tmp_path: Path) -> None:
    out, rep = tmp_path / "o" / "result.csv", tmp_path / "report.json"
    write_outputs(_outcome(["a", "b"], [["1", "2"]], {"k": 1}), out, rep)
    assert out.read_text() == "a;b\n1;2\n" and '"k": 1' in rep.read_text()
    from fedanon.errors import ProtocolError

    with pytest.raises(ProtocolError):
        write_outputs(RunOutcome("r", None, {}), tmp_path / "none.csv", None)
    assert not (tmp_path / "none.csv").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("delimiter", [";", ","])
def test_result_cells_with_delimiters_quotes_and_newlines_parse_back(tmp_path: Path, delimiter: str) -> None:
    """A released cell may hold the delimiter, a quote or a line break (a generalized label, a
    free-text insensitive column): the coordinator's CSV must read back to the very same cells,
    as a local run's does. Joining cells unquoted would split or merge rows here."""
    import csv

    columns = ["zip; code", 'say "hi"', "plain"]
    rows = [["1;2", 'a "b"', "x"], ["line\nbreak", "c,d", " padded "], ["*", "", "y"]]
    out = tmp_path / "result.csv"
    write_outputs(_outcome(columns, rows), out, None, delimiter=delimiter)
    with out.open(newline="", encoding="utf-8") as fh:
        parsed = list(csv.reader(fh, delimiter=delimiter))
    assert parsed == [columns, *rows]


def test_root_cause_prefers_the_failing_party_over_echoes() -> None:
    errors = [("p1", "p1: party 'p3' aborted the run: disk full"), ("p3", "p3: disk full")]
    assert _root_cause(errors) == "run failed at party 'p3': p3: disk full"


def test_check_protocol_over_in_memory_transport() -> None:
    from fedanon.protocols.kit.api import RoleContext, RunSettings
    from fedanon.protocols.kit.transport import InMemoryNetwork

    parties = {"p1": "primary", "p2": "primary", "h": "helper"}
    net = InMemoryNetwork(list(parties))
    settings = RunSettings("r", "CHECK", "horizontal", None, parties, "p1",  # type: ignore[arg-type]
                           {"bulk_mb": 1, "bulk_from": "p2", "bulk_to": "h"})
    outcomes: dict[str, object] = {}

    def go(name: str) -> None:
        fn = role_function("check", parties[name])
        outcomes[name] = fn(RoleContext(name, net.transport(name), settings, None))

    threads = [threading.Thread(target=go, args=(n,)) for n in parties]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert set(outcomes) == set(parties)
    p1 = outcomes["p1"]
    assert sorted(r[1] for r in p1.output_rows) == ["h", "p2"]  # type: ignore[attr-defined]
    assert outcomes["h"].report["bulk_bytes_received"] == float(1 << 20)  # type: ignore[attr-defined]
    assert outcomes["p2"].output_rows is None  # type: ignore[attr-defined]


def test_local_data_keeps_only_named_columns_and_subset(tmp_path: Path) -> None:
    pytest.importorskip("fedanon.data.io.delimited")
    pytest.importorskip("fedanon.data.hierarchy")
    from fedanon.parties.config import DataConfig
    from fedanon.parties.localdata import load_local_data, load_party_data

    csv = _write(tmp_path / "d.csv", "name;age;sex;diag;sub\nAnn;34;f;flu;1\nBob;51;m;cold;0\n")
    hier = _write(tmp_path / "sex.csv", "f;*\nm;*\n")
    local = load_local_data(DataConfig(csv=csv, quasi_identifiers={"sex": hier}, sensitive={"diag": None},
                                       subset_column="sub"))
    assert local.columns == ["sex", "diag"]  # the direct identifier "name" never leaves
    assert local.rows == [["f", "flu"], ["m", "cold"]]
    assert local.research_subset is not None and local.research_subset.tolist() == [True, False]
    assert set(local.hierarchies) == {"sex"}
    with pytest.raises(InputError, match="subset column 'sub' must be 0 or 1, got 'maybe'"):
        load_local_data(DataConfig(csv=_write(tmp_path / "e.csv", "sex;sub\nf;maybe\n"),
                                   quasi_identifiers={"sex": hier}, subset_column="sub"))
    # the same message as `fedanon anonymize` gives (fedanon.data.prepare): file, line, column, role
    with pytest.raises(InputError, match=r"d\.csv, line 1: unknown column 'zip' \(quasi-identifier\)"):
        load_local_data(DataConfig(csv=csv, quasi_identifiers={"zip": hier}))
    with pytest.raises(InputError, match=r"unknown column 'tid' \(TID\)"):
        load_local_data(DataConfig(csv=csv, quasi_identifiers={"sex": hier}, tid_column="tid"))
    local, removed = load_party_data(DataConfig(csv=csv, quasi_identifiers={"sex": hier}, subset_column="sub"))
    assert removed == ["name", "age", "diag"]  # the subset flags are read, not reported as dropped


def test_party_check_config_cli(tmp_path: Path, capsys) -> None:
    certs.init_ca(tmp_path)
    certs.issue(tmp_path, "p1")
    example = DATA / "example"
    cfg = _write(tmp_path / "p1.toml", f"""
[party]
name = "p1"
listen = "127.0.0.1:0"
[tls]
cert = "p1.crt"
key = "p1.key"
ca = "ca.crt"
[data]
csv = "{example / 'example.csv'}"
[data.quasi_identifiers]
age = "{example / 'example_hierarchy_age.csv'}"
[data.sensitive]
diagnosis = ""
""")
    assert cli_main(["party", "check-config", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "8 rows" in out and "age, diagnosis" in out
    (tmp_path / "p1.key").unlink()
    assert cli_main(["party", "check-config", "--config", str(cfg)]) == 2
    assert "cannot read TLS key file" in capsys.readouterr().err


def test_daemon_refuses_to_start_with_someone_elses_certificate(tmp_path: Path) -> None:
    from fedanon.parties.daemon import check_identity

    certs.init_ca(tmp_path / "ca")
    certs.issue(tmp_path / "ca", "p1")
    certs.issue(tmp_path / "ca", "p2")
    certs.init_ca(tmp_path / "other")
    cfg_text = """
[party]
name = "p1"
listen = "127.0.0.1:0"
[tls]
cert = "ca/{cert}.crt"
key = "ca/{key}.key"
ca = "{ca}/ca.crt"
"""
    ok = load_party_config(_write(tmp_path / "ok.toml", cfg_text.format(cert="p1", key="p1", ca="ca")))
    check_identity(ok)
    with pytest.raises(InputError, match="certificate is for 'p2', but this party is 'p1'"):
        check_identity(load_party_config(_write(tmp_path / "a.toml", cfg_text.format(cert="p2", key="p2", ca="ca"))))
    with pytest.raises(InputError, match="private key does not belong"):
        check_identity(load_party_config(_write(tmp_path / "b.toml", cfg_text.format(cert="p1", key="p2", ca="ca"))))
    with pytest.raises(InputError, match="not signed by the run CA"):
        check_identity(load_party_config(_write(tmp_path / "c.toml", cfg_text.format(cert="p1", key="p1", ca="other"))))


def test_coordinator_rejects_bad_privacy_before_contacting_anyone(tmp_path: Path) -> None:
    pytest.importorskip("fedanon.model.config")
    from fedanon.parties.config import RunConfig, RunPartyEntry, TlsFiles
    from fedanon.parties.coordinator import Coordinator

    certs.init_ca(tmp_path)
    certs.issue(tmp_path, "c")
    tls = TlsFiles(tmp_path / "c.crt", tmp_path / "c.key", tmp_path / "ca.crt")
    # port 9 (discard) on loopback: nothing listens, so any contact attempt would fail differently
    parties = [RunPartyEntry("p1", "127.0.0.1:9", "primary"), RunPartyEntry("h", "127.0.0.1:9", "helper")]

    def cfg(protocol: str, privacy: dict) -> RunConfig:
        return RunConfig("c", tls, protocol, "horizontal", parties, "p1", privacy, {}, None, None)

    with pytest.raises(InputError, match="k must be an integer >= 1"):
        Coordinator(cfg("B", {"quasi_identifiers": ["age"], "k": 0})).run()
    with pytest.raises(InputError, match=r"protocol B needs a \[privacy\] section"):
        Coordinator(cfg("b", {})).run()
    with pytest.raises(PeerError, match="unreachable"):
        Coordinator(cfg("check", {})).run()


def test_outputs_to_pipes_and_symlinks_are_written_in_place(tmp_path: Path) -> None:
    """Never replace a special file (a FIFO here; /dev/null in real life) or a symlink by a regular file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_outputs(_outcome(["a"], [["1"]]), fifo, None)
    reader.join(10)
    assert got == ["a\n1\n"] and stat.S_ISFIFO(fifo.lstat().st_mode)
    target = tmp_path / "real.csv"
    target.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    write_outputs(_outcome(["a"], [["2"]]), link, None)
    assert link.is_symlink() and target.read_text() == "a\n2\n"
