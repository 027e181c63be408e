"""Hybrid data layouts: which party holds which columns for which persons (LAYOUT.toml).

Why a file of its own: in a hybrid consortium neither "every party holds every column"
(horizontal) nor "every party holds every person" (vertical) is true, so the run needs a
statement of who holds which cells before anything is encrypted. A layout is a list of
parties, each with its columns and its persons:

* a *column group* is the set of parties holding the same columns; its parties hold
  disjoint persons (a horizontal block inside the layout). Different groups hold disjoint
  columns and are joined on the shared person identifier;
* for `fedanon simulate` a party's persons are a rule over the pooled table's row numbers
  (``"all"``, ``"i/n"`` = rows numbered i, i+n, i+2n, ... counting from 1, or a list of
  such rules); a real party instead names its own data file (``data``), whose identifier
  column says which persons it holds.

A person absent from some column group is dropped before the search (see
docs/protocols/hybrid.md for why dropping rather than a missing-value code). Every problem is
one `InputError` naming the file, the key (and line where it can be found) and the value.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from fedanon.data.io.delimited import read_table_csv
from fedanon.errors import InputError
from fedanon.kit.tomlfile import load_toml_file

_RULE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_PARTY_KEYS = {"name", "columns", "persons", "data"}
_TOP_KEYS = {"identifier", "party", "delimiter"}
_SHOWN = 5


@dataclass(frozen=True)
class PersonRule:
    """Rows numbered `first`, `first + every`, ... (from 1) of the pooled table; every=1, first=1: all."""

    first: int
    every: int

    def holds(self, row_number: int) -> bool:
        return (row_number - self.first) % self.every == 0

    def text(self) -> str:
        return "all" if self.every == 1 else f"{self.first}/{self.every}"


@dataclass
class LayoutParty:
    name: str
    columns: list[str]
    rules: list[PersonRule] = field(default_factory=list)  # simulation: whom it holds
    data: Path | None = None  # a real party: its own file with the identifier column

    def persons(self, n_rows: int) -> list[int]:
        """0-based indices of the pooled rows this party holds (simulation rules)."""
        return [i for i in range(n_rows) if any(r.holds(i + 1) for r in self.rules)]


@dataclass
class Layout:
    path: Path
    identifier: str
    parties: list[LayoutParty]
    text: str = ""
    delimiter: str = ";"  # of the parties' data files, as in every fedanon CSV

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.parties]

    def column_groups(self) -> list[list[LayoutParty]]:
        """Parties with equal column sets, groups in order of first appearance."""
        groups: dict[tuple[str, ...], list[LayoutParty]] = {}
        for party in self.parties:
            groups.setdefault(tuple(sorted(party.columns)), []).append(party)
        return list(groups.values())

    @property
    def columns(self) -> list[str]:
        """Every held column once, in order of first appearance."""
        out: list[str] = []
        for party in self.parties:
            out.extend(c for c in party.columns if c not in out)
        return out

    def joined_rows(self, n_rows: int) -> list[int]:
        """0-based pooled rows held by every column group: the persons that survive the join."""
        kept = set(range(n_rows))
        for group in self.column_groups():
            held: set[int] = set()
            for party in group:
                held.update(party.persons(n_rows))
            kept &= held
        return sorted(kept)

    # -- errors -----------------------------------------------------------------------
    def fail(self, key: str, value: Any, problem: str, near: str | None = None) -> InputError:
        """One line: file, line (where found), key and value, then the problem."""
        line = _line_of(self.text, near if near is not None else str(value), key)
        where = f"{self.path}:{line}" if line else str(self.path)
        return InputError(f"{where}: {key} = {_short(value)}: {problem}")


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, list) else "[" + ", ".join(repr(v) for v in value[:_SHOWN]) + (
        ", ...]" if len(value) > _SHOWN else "]")
    return text if len(text) <= 200 else text[:197] + "..."


def _line_of(text: str, needle: str, key: str) -> int | None:
    """The first line holding `needle` after the party header the key names (best effort)."""
    if not text:
        return None
    lines = text.splitlines()
    start = 0
    m = re.match(r"party\[(\d+)\]", key)
    if m:
        headers = [i for i, line in enumerate(lines) if line.strip().startswith("[[party]]")]
        index = int(m.group(1)) - 1
        if 0 <= index < len(headers):
            start = headers[index]
    leaf = key.rsplit(".", 1)[-1]
    for i in range(start, len(lines)):
        stripped = lines[i].split("#", 1)[0]
        if needle and needle in stripped:
            return i + 1
    for i in range(start, len(lines)):
        if lines[i].strip().startswith(leaf):
            return i + 1
    return None


def _rules(layout: Layout, key: str, value: Any) -> list[PersonRule]:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise layout.fail(key, value, 'names no persons (use "all", "i/n" or a list of "i/n")')
    rules: list[PersonRule] = []
    for item in items:
        if not isinstance(item, str):
            raise layout.fail(key, item, 'a person rule is a string: "all" or "i/n"')
        if item.strip().lower() == "all":
            rules.append(PersonRule(1, 1))
            continue
        m = _RULE.match(item)
        if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
            raise layout.fail(key, item, 'expected "all" or "i/n" with 1 <= i <= n (rows i, i+n, ... from 1)')
        rules.append(PersonRule(int(m.group(1)), int(m.group(2))))
    return rules


def parse_layout(path: str | Path) -> Layout:
    """Read and check LAYOUT.toml on its own (see `check_against_columns`, `check_party_files`)."""
    path = Path(path)
    doc = load_toml_file(path, "layout file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        text = ""
    layout = Layout(path, "", [], text)
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise layout.fail(unknown[0], doc[unknown[0]], f"unknown key (expected {', '.join(sorted(_TOP_KEYS))})",
                          near=unknown[0])
    identifier = doc.get("identifier", "tid")
    if not isinstance(identifier, str) or not identifier.strip():
        raise layout.fail("identifier", identifier, "the identifier column's name must be a non-empty string")
    layout.identifier = identifier
    delimiter = doc.get("delimiter", ";")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise layout.fail("delimiter", delimiter, "the data files' delimiter is one character")
    layout.delimiter = delimiter
    raw = doc.get("party")
    if not isinstance(raw, list) or not raw:
        raise layout.fail("party", raw, "a layout needs [[party]] tables (at least two)", near="[[party]]")
    for i, entry in enumerate(raw, start=1):
        key = f"party[{i}]"
        if not isinstance(entry, dict):
            raise layout.fail(key, entry, "must be a [[party]] table")
        extra = sorted(set(entry) - _PARTY_KEYS)
        if extra:
            raise layout.fail(f"{key}.{extra[0]}", entry[extra[0]],
                              f"unknown key (expected {', '.join(sorted(_PARTY_KEYS))})", near=extra[0])
        name = entry.get("name")
        if not isinstance(name, str) or not name.isidentifier():
            raise layout.fail(f"{key}.name", name, "a party name is a non-empty identifier (letters, digits, _)")
        if name in layout.names:
            raise layout.fail(f"{key}.name", name, "this party is declared twice")
        columns = entry.get("columns")
        if not isinstance(columns, list) or not columns or not all(isinstance(c, str) and c for c in columns):
            raise layout.fail(f"{key}.columns", columns, "a party's columns are a non-empty list of names",
                              near="columns")
        dupes = [c for c, n in Counter(columns).items() if n > 1]
        if dupes:
            raise layout.fail(f"{key}.columns", columns, f"column {dupes[0]!r} is listed twice", near="columns")
        if identifier in columns:
            raise layout.fail(f"{key}.columns", columns, f"the identifier {identifier!r} is not a data column; "
                              "every party holds it implicitly", near="columns")
        party = LayoutParty(name, list(columns))
        if "persons" in entry and "data" in entry:
            raise layout.fail(f"{key}.data", entry["data"], "give either persons (simulation) or data (a real "
                              "party's file), not both")
        if "data" in entry:
            if not isinstance(entry["data"], str) or not entry["data"]:
                raise layout.fail(f"{key}.data", entry["data"], "data is the path of the party's own table")
            party.data = (path.parent / entry["data"]) if not Path(entry["data"]).is_absolute() else Path(entry["data"])
        else:
            party.rules = _rules(layout, f"{key}.persons", entry.get("persons", "all"))
        layout.parties.append(party)
    if len(layout.parties) < 2:
        raise layout.fail("party", layout.names, "a hybrid layout needs at least two parties", near="[[party]]")
    _check_groups(layout)
    return layout


def _check_groups(layout: Layout) -> None:
    """Parties sharing a column must hold the same columns (one column group)."""
    seen: dict[str, LayoutParty] = {}
    for i, party in enumerate(layout.parties, start=1):
        for column in party.columns:
            other = seen.get(column)
            if other is None:
                seen[column] = party
            elif sorted(other.columns) != sorted(party.columns):
                raise layout.fail(f"party[{i}].columns", party.columns,
                                  f"column {column!r} is also held by party {other.name!r} with other columns "
                                  f"({', '.join(other.columns)}); parties that share a column must hold the same "
                                  "columns (for disjoint persons)", near="columns")


def check_against_columns(layout: Layout, columns: Sequence[str], n_rows: int | None = None) -> None:
    """Against the pooled table: unknown columns, columns no party holds, and (with `n_rows`)
    overlapping claims to one cell and persons no party of the first group holds."""
    known = set(columns)
    for i, party in enumerate(layout.parties, start=1):
        unknown = [c for c in party.columns if c not in known]
        if unknown:
            raise layout.fail(f"party[{i}].columns", party.columns,
                              f"unknown column {unknown[0]!r} (the table has {', '.join(columns)})", near=unknown[0])
    held = set(layout.columns)
    orphan = [c for c in columns if c not in held]
    if orphan:
        raise layout.fail("party", orphan, f"column(s) {', '.join(orphan)} are held by no party (remove them from "
                          "the input or give them to a party)", near="[[party]]")
    if layout.identifier in known:
        raise layout.fail("identifier", layout.identifier, "collides with a data column of the table")
    if n_rows is None:
        return
    for group in layout.column_groups():
        owner: dict[int, str] = {}
        for party in group:
            i = layout.parties.index(party) + 1
            if party.data is not None:
                raise layout.fail(f"party[{i}].data", str(party.data), "a simulation deals persons from the pooled "
                                  "table: give persons = \"all\" or \"i/n\" instead of a data file")
            mine = party.persons(n_rows)
            if not mine:
                raise layout.fail(f"party[{i}].persons", [r.text() for r in party.rules],
                                  f"holds none of the table's {n_rows} rows")
            for row in mine:
                if row in owner:
                    raise layout.fail(f"party[{i}].persons", [r.text() for r in party.rules],
                                      f"overlaps party {owner[row]!r}: both claim the cells of row {row + 1} in "
                                      f"column(s) {', '.join(party.columns)}",
                                      near="persons")
                owner[row] = party.name


@dataclass
class PartyFile:
    """A real party's identifiers, read from its own data file (for the consistency check)."""

    name: str
    identifiers: list[str]


def check_party_files(layout: Layout) -> dict[str, PartyFile]:
    """For parties with `data`: the file has the identifier and the declared columns, no identifier
    twice, and parties of one column group claim disjoint persons. For a planning check by one
    operator who holds every file (a real run checks the same things on encrypted identifiers)."""
    files: dict[str, PartyFile] = {}
    for i, party in enumerate(layout.parties, start=1):
        if party.data is None:
            continue
        header, rows = read_table_csv(party.data, layout.delimiter)
        for needed in [layout.identifier] + party.columns:
            if needed not in header:
                raise layout.fail(f"party[{i}].data", str(party.data),
                                  f"the file has no column {needed!r} (its columns: {', '.join(header)})",
                                  near="data")
        at = header.index(layout.identifier)
        seen: dict[str, int] = {}
        for line, row in enumerate(rows, start=2):
            value = row[at]
            if value in seen:
                raise InputError(f"{party.data}:{line}: {layout.identifier} = {_short(value)}: identifier appears "
                                 f"twice at party {party.name!r} (also on line {seen[value]})")
            seen[value] = line
        files[party.name] = PartyFile(party.name, list(seen))
    for group in layout.column_groups():
        owner: dict[str, str] = {}
        for party in group:
            if party.name not in files:
                continue
            for value in files[party.name].identifiers:
                if value in owner:
                    raise InputError(f"{party.data}: {layout.identifier} = {_short(value)}: party {party.name!r} "
                                     f"and party {owner[value]!r} both hold the cells of this person in column(s) "
                                     f"{', '.join(party.columns)}")
                owner[value] = party.name
    return files
