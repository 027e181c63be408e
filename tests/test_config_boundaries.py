"""A run's privacy config is validated once per process at each trust boundary, and only there.

The boundaries: where the config enters from a user (flags/TOML, the Python API, a run file at
the coordinator) and where it arrives over the wire at a party's daemon. Inside (run settings,
protocol roles, the engine) the validated config is taken as it is. A spy on
`AnonymizationConfig.validate` counts the calls and records who made them; a party must still
refuse a bad config from the network with a message that names the problem.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import grpc
import pytest

from fedanon.cli.kit.runconfig import add_privacy_arguments, config_from_args
from fedanon.errors import InputError
from fedanon.model.config import AnonymizationConfig
from fedanon.parties.config import Limits
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty
from fedanon.parties.pki.tls import channel_options
from fedanon.proto import fedanon_pb2 as pb
from fedanon.proto import fedanon_pb2_grpc as pb_grpc
from protocol_cases import EX_ATTRS, EX_QIS, load, run_protocol

from datasets import EXAMPLE_DIR as EXAMPLE
from example_parties import example_primaries


@pytest.fixture
def validations(monkeypatch):
    """Every call of validate() as (module of the caller, id of the config)."""
    calls: list[tuple[str, int]] = []
    real = AnonymizationConfig.validate

    def spy(self):
        calls.append((sys._getframe(1).f_globals.get("__name__", "?"), id(self)))
        return real(self)

    monkeypatch.setattr(AnonymizationConfig, "validate", spy)
    return calls


def _config_from_flags() -> AnonymizationConfig:
    """The config as `fedanon simulate` builds it: the flags are the user boundary."""
    import argparse

    parser = argparse.ArgumentParser()
    add_privacy_arguments(parser)
    qis = [arg for q in EX_QIS for arg in ("--qi", f"{q}={EXAMPLE / f'example_hierarchy_{q}.csv'}")]
    args = parser.parse_args([*qis, "--k", "2"])
    return config_from_args(args).config


def test_an_in_memory_b_run_validates_its_config_once(validations):
    config = _config_from_flags()
    run, _local = run_protocol("B", load("example", EX_ATTRS), config, "horizontal", 3)
    assert not run.errors, run.errors
    assert run.recipient_outcome is not None and run.recipient_outcome.output_rows
    # once, at the flags; the run settings, the roles of four parties and the engine did not repeat it
    assert [module for module, _ in validations] == ["fedanon.cli.kit.runconfig"]


def test_a_config_built_in_python_is_still_validated_once_where_it_enters(validations):
    config = AnonymizationConfig(EX_QIS, k=2)  # never validated: the run is its entry point
    run, _local = run_protocol("B", load("example", EX_ATTRS), config, "horizontal", 2)
    assert not run.errors, run.errors
    assert len(validations) == 1 and validations[0][1] == id(config)


def test_a_change_after_validation_is_validated_again():
    config = AnonymizationConfig(EX_QIS, k=2).validate()
    assert config.validated
    config.k = 0  # a stale mark must not let this through
    assert not config.validated
    with pytest.raises(InputError, match="k must be an integer >= 1"):
        config.ensure_valid()


def test_a_b_run_over_daemons_validates_once_per_boundary(tmp_path: Path, validations):
    parties = [*example_primaries(tmp_path, names=("p1", "p2")), SimulatedParty("h", "helper")]
    config = _config_from_flags()
    with SimulatedNetwork(parties, in_process=True) as net:  # real gRPC over mutual TLS, daemons as threads
        outcome = net.run("B", "horizontal", config, "p1")
    assert outcome.output_rows
    by_module = Counter(module for module, _ in validations)
    # the flags once; each party's daemon once for the config it received over the wire; nothing
    # else: the coordinator took the validated config, and no role or engine call checked it again
    assert by_module == {"fedanon.cli.kit.runconfig": 1, "fedanon.parties.daemon": len(parties)}, by_module
    assert len({config_id for _, config_id in validations}) == len(validations)  # never the same object twice


def test_the_coordinator_validates_a_run_file_config_once(tmp_path: Path, validations):
    parties = [*example_primaries(tmp_path, names=("p1", "p2")), SimulatedParty("h", "helper")]
    with SimulatedNetwork(parties, in_process=True) as net:
        cfg = net.run_config("B", "horizontal", {"quasi_identifiers": EX_QIS, "k": 2}, "p1")  # as a run file gives it
        from fedanon.parties.coordinator import Coordinator

        coordinator = Coordinator(cfg)
        outcome = coordinator.run()
    assert outcome.output_rows and coordinator.config is not None and coordinator.config.k == 2
    by_module = Counter(module for module, _ in validations)
    assert by_module == {"fedanon.parties.coordinator": 1, "fedanon.parties.daemon": len(parties)}, by_module


@pytest.mark.parametrize("config_json, message", [
    ('{"quasi_identifiers": ["age", "age"], "k": 2}', "quasi-identifiers listed twice"),
    ('{"quasi_identifiers": ["age"], "k": 0}', "k must be an integer >= 1, got 0"),
    ('{"quasi_identifiers": ["age"], "k": 2, "metric": "nope"}', "unknown metric 'nope'"),
])
def test_a_party_refuses_a_bad_config_from_the_wire_with_a_clear_message(tmp_path: Path, config_json, message):
    """The coordinator would refuse these; a coordinator that does not (or a forged request) meets the daemon."""
    parties = [*example_primaries(tmp_path, names=("p1", "p2")), SimulatedParty("h", "helper")]
    with SimulatedNetwork(parties, in_process=True) as net:
        cert, key, ca = net.tls("coordinator").read()
        creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
        with grpc.secure_channel(net.address("p1"), creds, options=channel_options(Limits(), "p1")) as ch:
            request = pb.RunRequest(run_id="bad-config", protocol="B", distribution="horizontal",
                                    parties=[pb.PartyRole(name=p.name, role=p.role, address=net.address(p.name))
                                             for p in parties],
                                    result_recipient="p1", config_json=config_json)
            with pytest.raises(grpc.RpcError) as err:
                pb_grpc.PartyStub(ch).Prepare(request, timeout=10)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    details = err.value.details()
    assert "invalid privacy config" in details and message in details, details
    assert "Traceback" not in details and "internal error" not in details


def test_run_settings_hold_only_a_valid_config():
    """An in-process run's entry point: a config built in Python that is not valid never reaches a role."""
    from protocol_cases import settings_for

    with pytest.raises(InputError, match="quasi-identifiers listed twice"):
        settings_for("B", "horizontal", 2, AnonymizationConfig(["age", "age"], k=2))
