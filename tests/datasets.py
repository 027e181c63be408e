"""Where the bundled datasets live, and the few ways tests load them -- in one place.

Tests import the paths from here (`from datasets import EXAMPLE_DIR`) instead of rebuilding them
from `fedanon.__file__` in every file; `conftest.py` offers the loaded tables as fixtures.
"""

from __future__ import annotations

from pathlib import Path

import fedanon
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.io.delimited import read_table_csv

DATA_DIR = Path(fedanon.__file__).resolve().parent / "data"
EXAMPLE_DIR = DATA_DIR / "example"
ADULT_DIR = DATA_DIR / "adult"
EXAMPLE_QIS = ("age", "sex", "zipcode")
ADULT_QIS = ("sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation")


def hierarchy_path(dataset: str, attribute: str) -> Path:
    return DATA_DIR / dataset / f"{dataset}_hierarchy_{attribute}.csv"


def qi_flags(dataset: str, attributes: tuple[str, ...] | list[str]) -> list[str]:
    """`--qi NAME=HIERARCHY.csv` for each attribute, as one argument each."""
    return [f"--qi={a}={hierarchy_path(dataset, a)}" for a in attributes]


def load(dataset: str, attributes: tuple[str, ...] | list[str]) -> tuple[list[str], list[list[str]], dict[str, Hierarchy]]:
    """The dataset's header, rows and the hierarchies of `attributes`."""
    header, rows = read_table_csv(DATA_DIR / dataset / f"{dataset}.csv")
    return header, rows, {a: Hierarchy.read_csv(hierarchy_path(dataset, a), a) for a in attributes}
