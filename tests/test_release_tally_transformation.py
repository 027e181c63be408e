"""A release tally made at another transformation than the result's is named before any count or
digest is compared, by the per-party check (horizontal and vertical runs) and by the per-column-group
check (hybrid runs) alike: a helper telling parties different nodes is caught as that, not as a
row-count or digest mismatch that would hide the reason."""

from __future__ import annotations

import numpy as np
import pytest

from fedanon.data.table import EncodedTable
from fedanon.protocols.hybrid.join import check_grouped_tallies
from fedanon.protocols.kit.release_tally import Tally, check_tallies

RESULT = {"age": 1, "sex": 0}
TABLE = EncodedTable(["age", "sex"], np.zeros((3, 2), dtype=np.int32), [[b"x"], [b"y"]])


def _tallies(second: dict[str, int]) -> dict[str, Tally]:
    # rows and digests deliberately wrong: the transformation must be reported first, and alone
    return {"p1": Tally("p1", 99, "0" * 64, ["age", "sex"], dict(RESULT)),
            "p2": Tally("p2", 99, "0" * 64, ["age", "sex"], second)}


@pytest.mark.parametrize("check", ["horizontal", "vertical", "grouped"])
def test_a_tally_at_another_transformation_is_named_first(check: str) -> None:
    tallies = _tallies({"age": 2, "sex": 0})
    if check == "grouped":
        problems = check_grouped_tallies(tallies, b"k" * 32, TABLE, RESULT, [["p1", "p2"]])
    else:
        problems = check_tallies(tallies, b"k" * 32, TABLE, None, RESULT, vertical=check == "vertical")
    assert problems == ["the helper told party 'p2' another transformation than the result reports"]


def test_levels_given_as_other_integer_types_are_the_same_transformation() -> None:
    tallies = _tallies(dict(RESULT))
    problems = check_tallies(tallies, b"k" * 32, TABLE, None, {q: np.int64(v) for q, v in RESULT.items()},
                             vertical=False)
    assert problems and "another transformation" not in " ".join(problems)  # the counts are what differs
