"""Independent verifier: re-checks an anonymized table against its privacy model.

Why a second implementation: the engine groups rows with vectorized NumPy code,
roll-ups and snapshots, and every protocol ends in that same code. A bug there
would be invisible to tests that only compare the engine with itself. This
module therefore shares NO code with the engine's search or grouping path: it
works row by row on plain Python values (bytes), groups with dicts, and
recomputes every model from its textbook definition. It is deliberately slow
and simple; use it in tests and for auditing, not in the search.

Semantics checked (the same as documented for the engine):

* every output QI cell is the input value's generalization at one level per
  QI (the reported level if `transformation` is given), or the row is
  suppressed (every QI cell is ``*``); non-QI cells are unchanged;
* released (non-suppressed) rows are grouped by their output QI tuple; every
  such class satisfies k-anonymity, ℓ-diversity, t-closeness and δ-presence;
* the number of suppressed rows is at most ``floor(suppression × n)``.

δ-presence (research subset S of the population table = the input): classes
are formed over the whole population and every model (k, ℓ, t) is judged on
those population classes; a class containing research-subset rows must have
δmin ≤ |class ∩ S| / |class| ≤ δmax (classes without subset rows publish
nothing and are not checked for δ); the suppression limit is
``floor(suppression × n)`` over all rows, as for the other models.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Mapping, Sequence

from fedanon.data.io.delimited import read_table_csv
from fedanon.model.config import AnonymizationConfig
from fedanon.model.registry import ClassView

SUPPRESSED = b"*"
# Same tolerance as the engine: a class exactly at the bound (entropy log ℓ,
# EMD t) satisfies the model despite floating-point rounding.
EPS = 1e-9


def _b(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8")


def _hierarchy_rows(hierarchy: Any) -> list[list[bytes]]:
    rows = hierarchy.rows if hasattr(hierarchy, "rows") else hierarchy
    return [[_b(v) for v in row] for row in rows]


def _generalizer(hierarchy: Any) -> dict[bytes, list[bytes]]:
    """value -> [value at level 0, level 1, ...] straight from the CSV rows."""
    return {row[0]: row for row in _hierarchy_rows(hierarchy)}


def as_config(config: Any) -> AnonymizationConfig:
    """The config as an object: the verifier also takes the JSON-shaped dict protocols ship."""
    return config if isinstance(config, AnonymizationConfig) else AnonymizationConfig.from_dict(dict(config))


def verify_anonymized(
    raw_columns: Sequence[str],
    raw_rows: Sequence[Sequence[Any]],
    out_columns: Sequence[str],
    out_rows: Sequence[Sequence[Any]],
    config: Any,
    hierarchies: Mapping[str, Any],
    research_subset: Sequence[bool] | None = None,
    *,
    transformation: Mapping[str, int] | None = None,
    suppressed: Sequence[bool] | None = None,
    reported_suppressed_rows: int | None = None,
    reported_classes: int | None = None,
) -> list[str]:
    """Return human-readable violations; an empty list means the output is valid.

    `out_rows` must be aligned with `raw_rows` (same order and length, as the
    engine returns them). `hierarchies` maps each QI (and the sensitive
    attribute for hierarchical t-closeness) to a Hierarchy or its rows.
    `suppressed` (one flag per row) disambiguates rows that are legitimately
    generalized to ``*`` everywhere from suppressed rows; without it, a row is
    taken as released when its cells match the generalization.
    """
    problems: list[str] = []
    config = as_config(config)
    qis = list(config.quasi_identifiers)
    if list(out_columns) != list(raw_columns):
        return [f"output columns {list(out_columns)} differ from input columns {list(raw_columns)}"]
    if len(out_rows) != len(raw_rows):
        return [f"output has {len(out_rows)} rows, input {len(raw_rows)}"]
    n = len(raw_rows)
    col = {name: i for i, name in enumerate(raw_columns)}
    for q in qis:
        if q not in col:
            return [f"quasi-identifier {q!r} is not a column"]
        if q not in hierarchies:
            return [f"no hierarchy for quasi-identifier {q!r}"]
    gens = {q: _generalizer(hierarchies[q]) for q in qis}
    raw = [[_b(v) for v in row] for row in raw_rows]
    out = [[_b(v) for v in row] for row in out_rows]
    subset = [True] * n if research_subset is None else [bool(x) for x in research_subset]
    if len(subset) != n:
        return [f"research subset has {len(subset)} flags for {n} rows"]

    # 1. Non-QI cells are untouched.
    qi_idx = [col[q] for q in qis]
    other_idx = [i for i in range(len(raw_columns)) if i not in qi_idx]
    for r in range(n):
        for i in other_idx:
            if out[r][i] != raw[r][i]:
                problems.append(f"row {r + 1}: non-QI column {raw_columns[i]!r} changed "
                                f"{raw[r][i]!r} -> {out[r][i]!r}")

    # 2. Determine / check the level of each QI from the cells themselves.
    def all_star(r: int) -> bool:
        return all(out[r][i] == SUPPRESSED for i in qi_idx)

    levels: dict[str, int] = {}
    for q in qis:
        i = col[q]
        gen = gens[q]
        missing = {raw[r][i] for r in range(n) if raw[r][i] not in gen}
        if missing:
            problems.append(f"values {sorted(missing)[:5]} of {q!r} are missing from its hierarchy")
            return problems
        height = len(next(iter(gen.values())))
        candidates = [transformation[q]] if transformation is not None else list(range(height))
        chosen = None
        for lvl in candidates:
            if not 0 <= lvl < height:
                problems.append(f"reported level {lvl} of {q!r} outside 0..{height - 1}")
                continue
            ok = True
            for r in range(n):
                if suppressed is not None and suppressed[r]:
                    continue
                if out[r][i] != gen[raw[r][i]][lvl] and not (suppressed is None and all_star(r)):
                    ok = False
                    break
            if ok:
                chosen = lvl
                break
        if chosen is None:
            problems.append(f"column {q!r}: output cells are not the generalization of the input "
                            f"at {'the reported level' if transformation is not None else 'any single level'}")
            return problems
        levels[q] = chosen

    # 3. Which rows are released?
    released: list[bool] = []
    for r in range(n):
        matches = all(out[r][col[q]] == gens[q][raw[r][col[q]]][levels[q]] for q in qis)
        if suppressed is not None:
            if suppressed[r]:
                if not all_star(r):
                    problems.append(f"row {r + 1}: flagged suppressed but QI cells are not all '*'")
                released.append(False)
            else:
                if not matches:
                    problems.append(f"row {r + 1}: QI cells are not the generalization at levels {levels}")
                released.append(True)
        else:
            released.append(matches)
            if not matches and not all_star(r):
                problems.append(f"row {r + 1}: QI cells neither generalized nor suppressed")

    # 4. Suppression limit (all rows: the engine suppresses whole population classes).
    n_suppressed = sum(1 for r in range(n) if not released[r])
    limit = math.floor(float(config.suppression) * n + 1e-9)
    if n_suppressed > limit:
        problems.append(f"{n_suppressed} rows suppressed, limit is {limit}")
    if reported_suppressed_rows is not None and reported_suppressed_rows != n_suppressed:
        problems.append(f"report says {reported_suppressed_rows} suppressed rows, output has {n_suppressed}")

    # 5. Group released rows by their output QI tuple; count research-subset rows per class.
    classes: dict[tuple[bytes, ...], list[int]] = defaultdict(list)
    subset_in_class: Counter = Counter()
    for r in range(n):
        if not released[r]:
            continue
        key = tuple(out[r][col[q]] for q in qis)
        classes[key].append(r)
        if subset[r]:
            subset_in_class[key] += 1

    if reported_classes is not None and reported_classes != len(classes):
        problems.append(f"report says {reported_classes} classes, output has {len(classes)}")

    k = int(config.k or 1)
    models = list(config.models)
    if config.needs_subset and research_subset is None:
        problems.append("δ-presence configured but no research subset given")

    sensitive = config.sensitive_attributes
    overall: dict[str, dict[bytes, float]] = {}
    generalizers: dict[str, Any] = {}
    for attribute in sensitive:
        totals = Counter(raw[r][col[attribute]] for r in range(n))
        overall[attribute] = {v: c / n for v, c in totals.items()}
    for model in models:
        attribute = model.needs_hierarchy()
        if attribute is not None and attribute in hierarchies:
            generalizers[attribute] = _generalizer(hierarchies[attribute])

    for key, members in classes.items():
        label = "(" + ", ".join(v.decode("utf-8", "replace") for v in key) + ")"
        if len(members) < k:
            problems.append(f"class {label}: {len(members)} rows < k={k}")
        view = ClassView(size=len(members),
                         sensitive_counts={a: Counter(raw[r][col[a]] for r in members) for a in sensitive},
                         overall=overall, subset_rows=subset_in_class[key], generalizers=generalizers,
                         table_rows=n)
        for model in models:
            why = model.violation(view)
            if why:
                problems.append(f"class {label}: {why}")
    sizes = sorted(len(members) for members in classes.values())
    for model in models:
        why = model.release_violation(sizes, table_rows=n)
        if why:
            problems.append(f"release: {why}")
    records = [(tuple(out[r][col[q]] for q in qis), {a: raw[r][col[a]] for a in sensitive})
               for r in range(n) if released[r]]
    for model in models:
        why = model.records_violation(qis, records)
        if why:
            problems.append(f"release: {why}")
    return problems


def verify_result(table: Any, hierarchies: Mapping[str, Any], config: Any, result: Any,
                  research_subset: Sequence[bool] | None = None) -> list[str]:
    """Convenience wrapper for tests: check an `AnonymizationResult` against its input table.

    Only the tables' row values are used (decoded through their dictionaries),
    plus the result's reported transformation, suppression flags and count —
    never the engine's classes — so the check stays independent.
    """
    raw_rows = table.decode_rows()
    out_rows = result.output.decode_rows()
    return verify_anonymized(
        list(table.columns), raw_rows, list(result.output.columns), out_rows, config, hierarchies,
        research_subset=None if research_subset is None else [bool(x) for x in research_subset],
        transformation=dict(result.transformation),
        suppressed=[bool(x) for x in result.suppressed],
        reported_suppressed_rows=int(result.suppressed_rows),
        reported_classes=int(result.classes),
    )


def align_release(
    raw_columns: Sequence[str],
    raw_rows: Sequence[Sequence[Any]],
    out_columns: Sequence[str],
    out_rows: Sequence[Sequence[Any]],
    quasi_identifiers: Sequence[str],
    hierarchies: Mapping[str, Any],
    transformation: Mapping[str, int],
) -> tuple[list[list[bytes]] | None, list[str]]:
    """Put a permuted release (a protocol's output) back into input order.

    Protocols permute rows on purpose, so their output cannot be checked row by row
    against the input. Each released output row must be the generalization of a
    distinct input row at `transformation` with the same non-QI cells; each row whose
    QI cells are all ``*`` takes an unmatched input row with the same non-QI cells.
    Rows matched this way are interchangeable for every model (same class, same
    sensitive values), so any such matching is as good as the true one. Returns the
    output rows aligned with `raw_rows` (in input column order) or the problems found.
    """
    if sorted(out_columns) != sorted(raw_columns):
        missing = sorted(set(raw_columns) - set(out_columns))
        extra = sorted(set(out_columns) - set(raw_columns))
        return None, [f"output columns differ from the input's: missing {missing}, extra {extra}"]
    if len(out_rows) != len(raw_rows):
        return None, [f"output has {len(out_rows)} rows, input {len(raw_rows)}"]
    order = [list(out_columns).index(c) for c in raw_columns]
    out = [[_b(row[i]) for i in order] for row in out_rows]
    raw = [[_b(v) for v in row] for row in raw_rows]
    col = {name: i for i, name in enumerate(raw_columns)}
    qi_idx = [col[q] for q in quasi_identifiers]
    other_idx = [i for i in range(len(raw_columns)) if i not in qi_idx]
    gens = {q: _generalizer(hierarchies[q]) for q in quasi_identifiers}

    def others(row: Sequence[bytes]) -> tuple[bytes, ...]:
        return tuple(row[i] for i in other_idx)

    released_pool: dict[tuple, list[int]] = defaultdict(list)
    for r, row in enumerate(raw):
        try:
            gen = tuple(gens[q][row[col[q]]][transformation[q]] for q in quasi_identifiers)
        except (KeyError, IndexError):
            return None, [f"input row {r + 1} has a QI value or level its hierarchy lacks"]
        released_pool[(others(row), gen)].append(r)
    aligned: list[list[bytes] | None] = [None] * len(raw)
    starred = []
    problems: list[str] = []
    for o, row in enumerate(out):
        qis = tuple(row[i] for i in qi_idx)
        if all(v == SUPPRESSED for v in qis):
            starred.append(o)
            continue
        pool = released_pool.get((others(row), qis))
        if not pool:
            problems.append(f"output row {o + 1} is not the generalization of any (unmatched) input row")
            continue
        aligned[pool.pop()] = row
    suppressed_pool: dict[tuple, list[int]] = defaultdict(list)
    for r, row in enumerate(raw):
        if aligned[r] is None:
            suppressed_pool[others(row)].append(r)
    for o in starred:
        pool = suppressed_pool.get(others(out[o]))
        if not pool:
            problems.append(f"suppressed output row {o + 1} matches no remaining input row")
            continue
        aligned[pool.pop()] = out[o]
    if problems:
        return None, problems[:20]
    return [row for row in aligned if row is not None], []


def verify_release(
    raw_columns: Sequence[str],
    raw_rows: Sequence[Sequence[Any]],
    out_columns: Sequence[str],
    out_rows: Sequence[Sequence[Any]],
    config: Any,
    hierarchies: Mapping[str, Any],
    transformation: Mapping[str, int],
) -> list[str]:
    """Check a permuted release (every input row once, in any order) against the pooled input."""
    aligned, problems = align_release(raw_columns, raw_rows, out_columns, out_rows,
                                      list(as_config(config).quasi_identifiers), hierarchies, transformation)
    if aligned is None:
        return problems
    return verify_anonymized(raw_columns, raw_rows, raw_columns, aligned, config, hierarchies,
                             transformation=transformation)


def verify_output_file(
    path: Any,
    delimiter: str,
    raw_columns: Sequence[str],
    raw_rows: Sequence[Sequence[Any]],
    config: Any,
    hierarchies: Mapping[str, Any],
    *,
    written: Sequence[bool],
    unwritten_rows: Sequence[Sequence[Any]],
    encoding: str = "utf-8",
    research_subset: Sequence[bool] | None = None,
    transformation: Mapping[str, int] | None = None,
    suppressed: Sequence[bool] | None = None,
    reported_suppressed_rows: int | None = None,
    reported_classes: int | None = None,
) -> list[str]:
    """Re-read the written output file and verify what it holds (`fedanon anonymize --verify`).

    Checking the rows in memory would miss every fault between them and the disk
    (column order, quoting, encoding, dropped rows). `written[i]` says whether input
    row i was written (all rows; without δ-presence's non-subset rows and, with
    --drop-suppressed, without suppressed ones), in input order. Rows that were not
    written still belong to the population classes the models are judged on; they
    are taken from `unwritten_rows` (the output in memory, aligned with the input).
    The file may omit input columns (columns that are never released), never add any.
    """
    header, file_rows = read_table_csv(path, delimiter, encoding)
    unknown = [c for c in header if c not in raw_columns]
    if unknown or len(set(header)) != len(header):
        return [f"{path}: header {header} has columns that are not input columns (or repeats one): {unknown}"]
    config = as_config(config)
    needed = list(config.quasi_identifiers) + config.sensitive_attributes
    lacking = [c for c in needed if c not in header]
    if lacking:
        return [f"{path}: columns {lacking} the privacy model needs are missing from the file"]
    expected = sum(1 for w in written if w)
    if len(file_rows) != expected:
        return [f"{path}: {len(file_rows)} data rows, expected {expected}"]
    index = [list(raw_columns).index(c) for c in header]
    raw = [[row[i] for i in index] for row in raw_rows]
    pending = iter(file_rows)
    aligned = [next(pending) if w else [_b(row[i]).decode("utf-8", "backslashreplace") for i in index]
               for w, row in zip(written, unwritten_rows)]
    return verify_anonymized(header, raw, header, aligned, config, hierarchies, research_subset,
                             transformation=transformation, suppressed=suppressed,
                             reported_suppressed_rows=reported_suppressed_rows, reported_classes=reported_classes)
