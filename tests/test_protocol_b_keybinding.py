"""Key agreement bound to TLS identities: a helper that swaps a primary's X25519 key is caught.

When the transport offers the party's TLS material (`transport.tls_identity` = cert PEM,
key PEM, CA PEM), every primary signs its X25519 public key with its certificate key and
verifies the others' before sealing column keys for them. Without this, an actively
malicious helper could substitute its own public key and read the key bundles it relays.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedanon.crypto.errors import AuthenticationError
from fedanon.crypto.keyagreement import KeyAgreementIdentity
from fedanon.model.config import AnonymizationConfig
from fedanon.data.io.delimited import read_table_csv
from fedanon.data.hierarchy import Hierarchy
from fedanon.errors import PeerError
from fedanon.parties.pki import certs
from fedanon.protocols.kit import codec
from fedanon.protocols.kit.api import RunSettings
from fedanon.protocols.sim.equivalence import centralized, differences
from fedanon.protocols.sim.local_run import run_in_memory
from fedanon.protocols.sim.split import split_horizontal

from datasets import EXAMPLE_DIR as DATA
QIS = ["age", "sex", "zipcode"]
NAMES = ["p1", "p2", "p3", "helper"]


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, tuple[bytes, bytes, bytes]]:
    folder = tmp_path_factory.mktemp("ca")
    ca = certs.init_ca(folder, force=True)
    out = {}
    for name in NAMES:
        cert, key = certs.issue(folder, name)
        out[name] = (Path(cert).read_bytes(), Path(key).read_bytes(), Path(ca).read_bytes())
    return out


def _setup(pki, tamper: bool = False):
    def setup(transports) -> None:
        for name in ("p1", "p2", "p3"):
            transports[name].tls_identity = pki[name]
        if not tamper:
            return
        helper = transports["helper"]
        original = helper._deliver
        fake = KeyAgreementIdentity.generate("p2")

        def swap_p2_key(to: str, topic: str, payload: bytes) -> None:
            if topic == "b/roster":
                parts = codec.unpack_message(payload)
                control = json.loads(parts["control"])
                if control.get("ok"):
                    control["public_keys"]["p2"] = fake.public_bytes().hex()  # man in the middle
                    parts["control"] = json.dumps(control).encode()
                    payload = codec.pack_message(parts)
            original(to, topic, payload)

        helper._deliver = swap_p2_key
    return setup


def _run(pki, tamper: bool):
    columns, rows = read_table_csv(DATA / "example.csv")
    hierarchies = {a: Hierarchy.read_csv(DATA / f"example_hierarchy_{a}.csv", a) for a in QIS}
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(split_horizontal(columns, rows, 3))}
    config = AnonymizationConfig(QIS, k=2)
    settings = RunSettings("binding-run", "B", "horizontal", config, {n: ("helper" if n == "helper" else "primary")
                                                                       for n in NAMES}, "p1", {})
    run = run_in_memory(settings, local, record=True, timeout_s=60, setup=_setup(pki, tamper))
    return run, columns, rows, hierarchies, config


def test_signed_keys_verify_and_the_run_succeeds(pki) -> None:
    run, columns, rows, hierarchies, config = _run(pki, tamper=False)
    assert not run.errors, run.errors
    roster = next(p for s, t, p in run.transports["p2"].recorded if t == "b/roster")
    bindings = json.loads(codec.unpack_message(roster)["control"])["bindings"]
    assert set(bindings) == {"p1", "p2", "p3"}
    out = run.outcomes["p1"]
    central = centralized(columns, rows, hierarchies, config)
    assert differences(central, out.report["transformation"], out.output_columns, out.output_rows) == []


def test_a_key_swapping_helper_is_caught_before_any_key_is_sealed(pki) -> None:
    run, *_ = _run(pki, tamper=True)
    assert isinstance(run.errors["p1"], AuthenticationError), run.errors
    assert "'p2'" in str(run.errors["p1"])
    # the leader refused before sealing column keys for anybody
    topics = [t for _, t, _ in run.transports["helper"].recorded]
    assert not any(t.startswith("b/keys-for/") for t in topics)
    for party in ("p2", "p3", "helper"):
        assert isinstance(run.errors[party], (PeerError, AuthenticationError)), (party, run.errors.get(party))


def test_a_network_transport_without_tls_identity_fails_closed() -> None:
    """A transport that needs key binding but offers no TLS identity stops the run (no silent fallback)."""
    columns, rows = read_table_csv(DATA / "example.csv")
    hierarchies = {a: Hierarchy.read_csv(DATA / f"example_hierarchy_{a}.csv", a) for a in QIS}
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(split_horizontal(columns, rows, 3))}
    settings = RunSettings("unbound-run", "B", "horizontal", AnonymizationConfig(QIS, k=2),
                           {n: ("helper" if n == "helper" else "primary") for n in NAMES}, "p1", {})

    def as_network(transports) -> None:
        for t in transports.values():
            t.requires_key_binding = True  # as over gRPC, but no identity given

    run = run_in_memory(settings, local, record=True, timeout_s=60, setup=as_network)
    assert "cannot bind its key-agreement key" in str(run.errors["p1"]), run.errors
    assert "p1" not in run.outcomes
