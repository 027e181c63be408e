"""Checks of how a command fails, shared by the CLI tests."""

from __future__ import annotations

from fedanon.cli import main
from fedanon.consortium import simulation


def one_line_error(capsys, *args: object) -> str:
    """Run `fedanon ARGS` in-process; it must exit 2 with exactly one line on stderr and no
    traceback (the project's rule for bad input). Returns that line."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def drop_first_released_row(monkeypatch) -> None:
    """Make every simulated run release one row fewer than it computed, so that a check against
    the centralized anonymization has a real difference to find."""
    real = simulation.simulate_table

    def one_row_short(*args, **kwargs):
        sim = real(*args, **kwargs)
        sim.rows = sim.rows[1:]
        return sim

    monkeypatch.setattr(simulation, "simulate_table", one_row_short)
