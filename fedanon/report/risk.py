"""Re-identification risk of a table and the privacy models it satisfies.

Attacker models (El Emam & Dankar 2008; Dankar & El Emam 2010, the dissertation's
[147, 152]); f_j is the size of equivalence class j in the released sample,
F_j the size of the matching class in the population, n the released rows:

* prosecutor (the target is known to be in the sample): record risk 1/f_j;
  highest = max 1/f_j, average = classes / n (= mean record risk);
* journalist (the target is someone in the population): record risk 1/F_j;
  highest = max 1/F_j, average = classes / sum_j F_j;
* marketer (re-identify as many as possible): average = sum_j (f_j / F_j) / n.

Population: a separate table (`population=`; `generalize_population` brings a
raw one to the sample's generalization), the whole input when only a
research subset is released (δ-presence), otherwise -- as ARX does without a
population model -- the sample itself (then journalist = prosecutor and
marketer = classes / n). "Records at risk" are released records whose risk
exceeds `threshold`. Suppressed rows are not released: they form no class.

Which rows of a written table are suppressed (`suppressed_rows_mask`): a
written output marks a suppressed row by '*' in every QI, but a transformation
that generalizes every QI to a '*' level releases such rows legitimately. The
file alone cannot tell the two apart, so the anonymization report's
`suppressed_rows` count decides: 0 -> every all-'*' row is released (one
class); all of them -> all suppressed; without a count, all-'*' rows count as
suppressed (the writer's convention). A count between the two leaves the
released all-'*' class's size known (so every risk figure is exact) but not
which of its rows are in it: then l and t are not reported.

What a table satisfies (as pycanon reports it) is judged on the same classes
as `engine/verify.py` judges them: released rows grouped by their QI tuple;
distributions for t-closeness over all rows of the table.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from fedanon.stats.keys import group_keys
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.errors import InputError
from fedanon.report.sensitive import sensitive_figures

DEFAULT_THRESHOLD = 0.2  # risk above 1/5: records in classes smaller than 5
STAR = b"*"


def star_rows(table: EncodedTable, qis: Sequence[str]) -> np.ndarray:
    """Rows whose QI cells are all '*': how a written output marks suppressed rows."""
    out = np.ones(table.n_rows, dtype=bool)
    for q in qis:
        c = table.column_index(q)
        d = table.dictionaries[c]
        star = [i for i, v in enumerate(d) if v == STAR]
        out &= np.isin(table.codes[:, c], star) if star else False
    return out


def suppressed_rows_mask(table: EncodedTable, qis: Sequence[str],
                         suppressed_rows: int | None = None) -> tuple[np.ndarray, bool]:
    """(suppressed mask, exact?) of a written table, by the rule in the module docstring.

    `suppressed_rows`: the count the anonymization report gives (None: unknown).
    exact is False when only some all-'*' rows were suppressed (which ones is unknown;
    the mask then marks the first ones, which gives the right class sizes).
    """
    star = star_rows(table, qis)
    if suppressed_rows is None:
        return star, True
    stars = int(star.sum())
    if not 0 <= suppressed_rows <= stars:
        raise InputError(f"the report says {suppressed_rows} rows were suppressed, but the table has "
                         f"{stars} rows with '*' in every quasi-identifier")
    mask = np.zeros(table.n_rows, dtype=bool)
    mask[np.flatnonzero(star)[:suppressed_rows]] = True
    return mask, suppressed_rows in (0, stars)


def _classes(table: EncodedTable, rows: np.ndarray, columns: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(representative row per class, class of each row, class sizes) of `rows` grouped by `columns`.

    Classes come in ascending lexicographic order of their code tuples (as `np.unique(axis=0)`
    gives them, so every float sum over classes is unchanged), but found by the engine's
    mixed-radix key grouping one column at a time: `np.unique(axis=0)` sorts structured rows
    and took ~40 s per table at 4.8 M rows.
    """
    if rows.shape[0] == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    cols = [table.codes[rows, c] for c in columns]
    first, inverse = group_keys(cols, [len(table.dictionaries[c]) for c in columns])
    return first, inverse, np.bincount(inverse, minlength=first.shape[0]).astype(np.int64)


class RowClasses(NamedTuple):
    """Released rows already grouped by their QI tuple (the engine's grouping of the same node):
    class of each released row, in row order, and class sizes -- classes in ascending
    lexicographic order of their code tuples, as `_classes` finds them.

    `inverse` may be None where the figures need the sizes alone (no sensitive attribute,
    research subset or population table): on millions of rows the engine then answers from
    its cached class sizes, without a class per row."""

    inverse: np.ndarray | None
    sizes: np.ndarray


def _given_classes(given: RowClasses, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_classes`' answer from a grouping the caller already has (representative rows recomputed)."""
    sizes = np.asarray(given.sizes, dtype=np.int64)
    if given.inverse is None:
        if int(sizes.sum()) != rows.shape[0]:
            raise ValueError(f"given classes hold {int(sizes.sum())} rows, {rows.shape[0]} are released")
        return None, None, sizes  # type: ignore[return-value]  # table_risk asks for neither
    inverse = np.asarray(given.inverse)
    if inverse.shape != rows.shape:
        raise ValueError(f"given classes cover {inverse.shape[0]} rows, {rows.shape[0]} are released")
    first = np.empty(sizes.shape[0], dtype=np.int64)
    first[inverse] = np.arange(rows.shape[0], dtype=np.int64)
    return first, inverse, sizes


def _attacker(f: np.ndarray, big_f: np.ndarray, n: int, threshold: float) -> dict[str, Any]:
    risk = 1.0 / big_f
    at_risk = int(f[risk > threshold].sum())
    return {
        "highest": float(risk.max()),
        "average": float(len(f) / big_f.sum()),
        "records_at_risk": at_risk,
        "records_at_risk_fraction": at_risk / n,
    }


def _satisfies_sensitive(table: EncodedTable, attr: str, released: np.ndarray, inverse: np.ndarray,
                         n_classes: int, hierarchy: Hierarchy | None) -> dict[str, Any]:
    c = table.column_index(attr)
    codes = table.codes[:, c]
    code_map = hierarchy.code_map(table.dictionaries[c])[0] if hierarchy is not None else None
    return sensitive_figures(inverse, codes[released], n_classes, codes, len(table.dictionaries[c]), code_map)


def _population_sizes(table: EncodedTable, qis: Sequence[str], first: np.ndarray, rows: np.ndarray,
                      population: EncodedTable) -> np.ndarray:
    """F_j of every sample class, matched to the population by QI values."""
    idx = [population.column_index(q) for q in qis]
    counts: dict[tuple[bytes, ...], int] = {}
    dicts = [population.dictionaries[i] for i in idx]
    for row in population.codes[:, idx].tolist():
        key = tuple(d[v] for d, v in zip(dicts, row))
        counts[key] = counts.get(key, 0) + 1
    tidx = [table.column_index(q) for q in qis]
    out = np.zeros(len(first), dtype=np.int64)
    for j, r in enumerate(rows[first]):
        key = tuple(table.dictionaries[i][table.codes[r, i]] for i in tidx)
        out[j] = counts.get(key, 0)
        if out[j] == 0:
            shown = ", ".join(v.decode("utf-8", "backslashreplace")[:40] for v in key)
            raise InputError(f"population table lacks the class ({shown}) of the sample; "
                             f"it must hold the sample's QI values at the same generalization")
    return out


def generalize_population(sample: EncodedTable, population: EncodedTable,
                          hierarchies: Mapping[str, Hierarchy], suppressed: np.ndarray | None = None) -> EncodedTable:
    """The population with each QI (that has a hierarchy) generalized to the level it has in the sample.

    The level is the lowest one whose labels contain every value of the
    sample's released rows, so a released table can be assessed against the
    raw population it was drawn from.
    """
    qis = list(hierarchies)
    released = ~(star_rows(sample, qis) if suppressed is None else np.asarray(suppressed, dtype=bool))
    codes = population.codes.copy()
    dictionaries = [list(d) for d in population.dictionaries]
    for q, h in hierarchies.items():
        sc, pc = sample.column_index(q), population.column_index(q)
        used = {sample.dictionaries[sc][i] for i in np.unique(sample.codes[released, sc])}
        level = next((lvl for lvl in range(h.height) if used <= {row[lvl] for row in h.rows}), None)
        if level is None:
            raise InputError(f"column {q!r}: the table's values are not the labels of one level of its "
                             f"hierarchy {h.source or ''}".rstrip())
        code_map, level_dicts = h.code_map(population.dictionaries[pc])
        codes[:, pc] = code_map[level][population.codes[:, pc]]
        dictionaries[pc] = list(level_dicts[level])
    return EncodedTable(list(population.columns), codes, dictionaries)


def table_risk(
    table: EncodedTable,
    qis: Sequence[str],
    *,
    suppressed: np.ndarray | None = None,
    sample: np.ndarray | None = None,
    population: EncodedTable | None = None,
    sensitive: Sequence[str] = (),
    hierarchies: Mapping[str, Hierarchy] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    suppressed_rows: int | None = None,
    classes: RowClasses | None = None,
) -> dict[str, Any]:
    """Risk figures and satisfied models of `table` (see the module docstring for the definitions).

    `suppressed`: rows not released (default: `suppressed_rows_mask(table, qis, suppressed_rows)`);
    `sample`: released research subset (the rest of the table is its population);
    `classes`: the released rows' classes when the caller has grouped them already (an
    anonymization's grouping of the node; saves grouping millions of rows again).
    """
    if not 0.0 <= threshold <= 1.0:
        raise InputError(f"risk threshold must lie in [0, 1], got {threshold!r}")
    if not qis:
        raise InputError("no quasi-identifiers given (need at least one)")
    qi_idx = [table.column_index(q) for q in qis]
    sens = [s for s in sensitive]
    for s in sens:
        table.column_index(s)
        if s in qis:
            raise InputError(f"sensitive attribute {s!r} is also a quasi-identifier")
    exact = True
    if suppressed is None:
        supp, exact = suppressed_rows_mask(table, qis, suppressed_rows)
    else:
        supp = np.asarray(suppressed, dtype=bool)
    released = ~supp
    rows = np.flatnonzero(released)
    if classes is not None and classes.inverse is None and (sample is not None or population is not None or sens):
        raise ValueError("the risk of a sample, against a population or of sensitive attributes needs each "
                         "released row's class")
    first, inverse, sizes = _classes(table, rows, qi_idx) if classes is None else _given_classes(classes, rows)
    out: dict[str, Any] = {"rows": int(table.n_rows - supp.sum()), "suppressed_rows": int(supp.sum()),
                           "threshold": threshold}
    # the sample: all released rows, or the research subset's rows in their population classes
    if sample is not None:
        in_sample = np.asarray(sample, dtype=bool)[rows]
        f_all = np.bincount(inverse[in_sample], minlength=len(sizes))
        keep = f_all > 0
        f, big_f = f_all[keep], sizes[keep]
        out["population"] = "the whole input table (research subset released)"
        out["rows"] = int(in_sample.sum())
    else:
        f = sizes
        if population is not None:
            big_f = _population_sizes(table, qis, first, rows, population)
            out["population"] = f"separate population table ({population.n_rows} rows)"
        else:
            big_f = sizes
            out["population"] = "the sample itself (no population table given)"
    n = int(f.sum())
    out["classes"] = int(len(f))
    if n == 0:
        out.update(sample_uniques=0, prosecutor=None, journalist=None, marketer=None, class_sizes=[],
                   satisfies={"k": None, "sensitive": {}})
        return out
    out["sample_uniques"] = int((f == 1).sum())
    out["prosecutor"] = _attacker(f, f, n, threshold)
    out["journalist"] = _attacker(f, big_f, n, threshold)
    out["marketer"] = {"average": float((f / big_f).sum() / n)}
    sz, cnt = np.unique(f, return_counts=True)
    out["class_sizes"] = [{"size": int(s), "classes": int(c), "records": int(s * c)} for s, c in zip(sz, cnt)]
    hier = hierarchies or {}
    out["satisfies"] = {
        "k": int(sizes.min()),
        "sensitive": {s: _satisfies_sensitive(table, s, released, inverse, len(sizes), hier.get(s)) for s in sens}
        if exact else {},
    }
    if not exact:
        out["note"] = (f"{out['suppressed_rows']} of the rows with '*' in every quasi-identifier were suppressed, "
                       "the others released as one class; which ones is not in the table, so l and t are not "
                       "reported (risk figures and k are exact)")
    return out


def risk_bands(risk: dict[str, Any]) -> list[tuple[str, int]]:
    """Released records per prosecutor-risk band (for the risk-profile plot)."""
    bands = [(1.0, "100 %"), (0.5, "50-99 %"), (0.2, "20-49 %"), (0.1, "10-19 %"), (0.05, "5-9 %"),
             (0.01, "1-4 %"), (0.0, "<1 %")]
    out = {label: 0 for _, label in bands}
    for entry in risk.get("class_sizes", []):
        r = 1.0 / entry["size"]
        for lower, label in bands:
            if r >= lower - 1e-12:
                out[label] += entry["records"]
                break
    return list(out.items())


def size_bins(risk: dict[str, Any]) -> list[tuple[str, int]]:
    """Released records per class-size bin (for the class-size histogram)."""
    edges = [(1, 1), (2, 2), (3, 4), (5, 9), (10, 19), (20, 49), (50, 99), (100, 999), (1000, math.inf)]
    out = []
    for lo, hi in edges:
        label = str(lo) if lo == hi else (f"{lo}+" if hi == math.inf else f"{lo}-{hi}")
        out.append((label, sum(e["records"] for e in risk.get("class_sizes", []) if lo <= e["size"] <= hi)))
    return out
