"""Fixtures shared by the whole suite: the bundled tables, loaded once per session.

Each returns (header, rows, hierarchies) from `datasets.load`; tests must not modify them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helper modules beside the tests

from datasets import ADULT_QIS, EXAMPLE_QIS, load  # noqa: E402


@pytest.fixture(scope="session")
def example_table():
    """The dissertation's 8-row example with the hierarchies of its QIs and of diagnosis."""
    return load("example", EXAMPLE_QIS + ("diagnosis",))


@pytest.fixture(scope="session")
def adult_table():
    """ADULT (30,162 rows) with the hierarchies of its eight QIs and of salary-class."""
    return load("adult", ADULT_QIS + ("salary-class",))
