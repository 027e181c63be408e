"""Protocol B's X25519-to-TLS key binding over real party daemons (gRPC, mutual TLS).

The daemons' transport hands each party its TLS identity, so every primary signs its
key-agreement key with its certificate key and checks the others' signatures. A helper
daemon that swaps a primary's key in the roster it relays must stop the run before any
column key is sealed to the attacker's key.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fedanon.model.config import AnonymizationConfig
from fedanon.errors import FedanonError
from fedanon.parties.simulation import SimulatedParty, run_simulation

from example_parties import example_primaries

from datasets import EXAMPLE_DIR as DATA
QIS = ("age", "sex", "zipcode")
KEYSWAP = Path(__file__).with_name("keyswap_helper.py")

pytestmark = pytest.mark.slow


def _parties(tmp_path: Path, helper_launcher: tuple[str, ...] | None) -> list[SimulatedParty]:
    parties = example_primaries(tmp_path, sensitive={"diagnosis": None})
    parties.append(SimulatedParty("helper", "helper", launcher=helper_launcher))
    return parties


def test_honest_helper_run_succeeds_with_bound_keys(tmp_path: Path) -> None:
    result = run_simulation(_parties(tmp_path, None), "B", "horizontal", AnonymizationConfig(list(QIS), k=2), "p1")
    assert result.output_rows is not None and len(result.output_rows) == 8


def test_a_key_swapping_helper_daemon_stops_the_run(tmp_path: Path) -> None:
    launcher = (sys.executable, str(KEYSWAP))
    with pytest.raises(FedanonError) as err:
        run_simulation(_parties(tmp_path, launcher), "B", "horizontal", AnonymizationConfig(list(QIS), k=2), "p1")
    message = str(err.value)
    assert "p2" in message and ("sign" in message or "bind" in message or "certificate" in message), message
