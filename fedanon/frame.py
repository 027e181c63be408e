"""`anonymize_frame`: the engine for pandas users, with typed columns in and out.

Why a separate module: pandas is an optional extra (`fedanon[frame]`); party
daemons and protocols never need it. Cells are turned into text the way a CSV
export would spell them (integral floats without '.0', dates as ISO dates), the
very same engine runs, and the answer comes back typed:

* QI columns left at level 0 keep their dtype; generalized QI columns become
  `category` columns holding the hierarchy's labels;
* suppressed QI cells are missing values (NA / NaN / NaT) in every QI column;
* sensitive and `insensitive` columns are returned unchanged; `aggregate` columns
  (numeric) hold their released class's aggregate (float for mean, median and mode,
  the text "[min, max]" for interval; missing where the row is suppressed); every other
  column has no declared role and is dropped (never reaches the output).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from fedanon.engine.anonymizer import anonymize
from fedanon.engine.safepub import release, sampled_view
from fedanon.model.config import AnonymizationConfig
from fedanon.model.registry import ParseContext, PrivacyModel, model_types
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.result import AnonymizationResult
from fedanon.data.table import EncodedTable
from fedanon.errors import FedanonError, InputError
from fedanon.data.builders import BUILDERS, build_for_values
from fedanon.microagg.classwise import FUNCTIONS, aggregate_table, parse_numbers

if TYPE_CHECKING:
    import pandas as pd

    from fedanon.report.analysis import Analysis

HierarchyLike = Hierarchy | str | Path | Sequence[Sequence[str]]


def _pandas():  # type: ignore[no-untyped-def]
    try:
        import pandas as pd
    except ModuleNotFoundError:
        raise FedanonError("anonymize_frame needs pandas: pip install 'fedanon[frame]'") from None
    return pd


def cell_text(value: Any) -> str:
    """One cell as the text a hierarchy lists: 39.0 -> '39', dates -> ISO, missing -> ''."""
    pd = _pandas()
    if value is None or (not isinstance(value, (str, bytes)) and pd.isna(value)):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        x = float(value)
        return str(int(x)) if math.isfinite(x) and x.is_integer() else repr(x)
    if isinstance(value, (pd.Timestamp, dt.datetime)):
        ts = pd.Timestamp(value)
        return ts.strftime("%Y-%m-%d") if ts == ts.normalize() else ts.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def _hierarchy(name: str, spec: HierarchyLike, values: list[str]) -> Hierarchy:
    if isinstance(spec, Hierarchy):
        return spec if spec.attribute == name else Hierarchy(name, spec.rows, spec.source)
    if isinstance(spec, str) and (spec == "auto" or spec in BUILDERS):
        return build_for_values(spec, name, values)
    if isinstance(spec, (str, Path)):
        if not Path(spec).is_file():
            raise InputError(f"hierarchy of {name!r}: {spec!s} is neither a file nor one of "
                             f"auto, {', '.join(BUILDERS)}")
        return Hierarchy.read_csv(spec, name)
    return Hierarchy.from_rows(name, [[cell_text(v) for v in row] for row in spec])


@dataclass
class Report:
    """What `anonymize_frame` did; risk and utility are computed on first access (`analysis`)."""

    result: AnonymizationResult
    config: AnonymizationConfig
    hierarchies: dict[str, Hierarchy]
    table: EncodedTable
    suppressed: "pd.Series"
    dropped_columns: list[str] = field(default_factory=list)
    research_subset: np.ndarray | None = None
    #: per aggregated column: function, classes and the within-class SSE/SST figures
    aggregation: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def transformation(self) -> dict[str, int]:
        return dict(self.result.transformation)

    @property
    def information_loss(self) -> float:
        return self.result.information_loss

    @cached_property
    def analysis(self) -> "Analysis":
        from fedanon.report.analysis import analyze

        summary: dict[str, Any] = {"input": "(pandas DataFrame)"}
        if self.aggregation:
            summary["aggregation"] = self.aggregation
        return analyze(self.table, self.hierarchies, self.config, self.result,
                       research_subset=self.research_subset, summary=summary)

    def to_dict(self) -> dict[str, Any]:
        """The same JSON-able report `fedanon anonymize --report` writes (engine summary, risk, utility)."""
        out = self.result.to_report()
        out["config"] = self.config.to_dict()
        out["dropped_columns"] = list(self.dropped_columns)
        if self.aggregation:
            out["aggregation"] = {name: dict(x) for name, x in self.aggregation.items()}
        out.update(self.analysis.to_dict())
        return out

    def write_html(self, path: str | Path, title: str = "fedanon anonymization report") -> None:
        self.analysis.write_html(str(path), title)


FrameReport = Report  # deprecated name (before 0.1.0 the report was called FrameReport); use Report


def _config(qis: list[str], k: int, sensitive: str | None, settings: Mapping[str, Any],
            suppression: float, metric: str, sensitive_hierarchy: Hierarchy | None,
            weights: Mapping[str, float] | None = None) -> AnonymizationConfig:
    """The config from keyword settings: each registered model by its key, given as its CLI
    spelling ('recursive:3,2'), a TOML-style table ({'variant': 'distinct', 'l': 2}) or a model."""
    types = model_types()
    unknown = sorted(set(settings) - set(types))
    if unknown:
        raise InputError(f"anonymize_frame: unknown privacy model(s) {', '.join(unknown)}; "
                         f"known: {', '.join(types)}")
    models: list[PrivacyModel] = []
    for key, value in settings.items():
        if value is None:
            continue
        if isinstance(value, PrivacyModel):
            models.append(value)
            continue
        if types[key].uses_sensitive and sensitive is None:
            raise InputError(f"{key} needs sensitive='COLUMN'")
        ctx = ParseContext(sensitive=sensitive, sensitive_hierarchy=sensitive_hierarchy, source="anonymize_frame")
        models.append(types[key].parse(value, ctx))
        if ctx.files:
            raise InputError(f"anonymize_frame: {key} needs input files; use `fedanon anonymize` for it")
    config = AnonymizationConfig(qis, k=k, suppression=suppression, metric=metric, models=models,
                                 weights=None if weights is None else {str(q): w for q, w in weights.items()})
    config.validate()
    return config


def _typed(pd: Any, original: "pd.Series", out_values: list[bytes], level: int, suppressed: np.ndarray,
           order: list[bytes]) -> "pd.Series":
    if level == 0:
        series = original.copy()
        if suppressed.any():
            if series.dtype.kind in "iub":
                series = series.astype("Int64" if series.dtype.kind in "iu" else "boolean")
            elif series.dtype.kind not in "fmM" and not isinstance(series.dtype, (pd.CategoricalDtype, pd.StringDtype)):
                series = series.astype(object)
            series[suppressed] = None
        return series
    # a suppressed row is missing, not a category: its output cell ("*") is left out before the
    # categorical is built, since pandas refuses values outside the declared categories
    labels = [None if gone else v.decode("utf-8", "backslashreplace") for v, gone in zip(out_values, suppressed)]
    categories = [v.decode("utf-8", "backslashreplace") for v in order]
    cat = pd.Categorical(labels, categories=categories)
    return pd.Series(cat, index=original.index, name=original.name)


def anonymize_frame(
    df: "pd.DataFrame",
    qi: Mapping[str, HierarchyLike],
    *,
    k: int = 1,
    sensitive: str | None = None,
    l_diversity: Any = None,
    t_closeness: Any = None,
    suppression: float = 0.0,
    metric: str = "nonuniform-entropy",
    insensitive: Sequence[str] = (),
    sensitive_hierarchy: HierarchyLike | None = None,
    aggregate: Mapping[str, str] | None = None,
    weights: Mapping[str, float] | None = None,
    **models: Any,
) -> tuple["pd.DataFrame", Report]:
    """Optimally anonymize a DataFrame with the Flash engine.

    `qi` maps each quasi-identifier to its hierarchy: a `Hierarchy`, a path to an
    ARX CSV, a list of rows, or a builder name ('auto', 'interval', 'mask',
    'order', 'date') applied to the column's values. `l_diversity` and
    `t_closeness` take the CLI spellings ('distinct:2', 'recursive:3,2',
    '0.2:equal', '0.2:hierarchical'); every other registered privacy model is a keyword named by
    its key (e.g. `delta_disclosure='1.5'`), in its CLI spelling or as a table. Returns the anonymized frame (same index;
    columns: QIs, `sensitive`, `insensitive` in the input's order) and a report.
    `weights` maps QIs to their weight in the metric (ARX's attribute weights; QIs not named weigh 1).
    `dp='EPSILON,DELTA'` (or a table with epsilon, delta, steps, search_budget, seed) draws an
    (ε, δ)-differentially private SafePub release instead: the frame then holds the sampled
    rows only (their original index) and `report.result.extra["dp"]` the parameters and budget.
    `aggregate` maps numeric columns to 'mean', 'median', 'interval' or 'mode': each is released
    as its equivalence class's aggregate (not a quasi-identifier of the search; see
    `fedanon.microagg.classwise`), its SSE/SST in `report.aggregation`.
    """
    pd = _pandas()
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"anonymize_frame needs a pandas DataFrame, got {type(df).__name__}")
    columns = [str(c) for c in df.columns]
    if len(set(columns)) != len(columns):
        raise InputError(f"duplicate column names in the DataFrame: {columns}")
    qis = [str(q) for q in qi]
    functions = {str(c): str(f) for c, f in (aggregate or {}).items()}
    for name, function in functions.items():
        if function not in FUNCTIONS:
            raise InputError(f"anonymize_frame: unknown aggregate function {function[:40]!r} for column {name!r}; "
                             f"known: {', '.join(FUNCTIONS)}")
    declared = qis + ([sensitive] if sensitive else []) + [str(c) for c in insensitive] + list(functions)
    for name in declared:
        if name not in columns:
            raise InputError(f"unknown column {name!r}; the DataFrame has columns: {', '.join(columns)}")
    if len(set(declared)) != len(declared):
        raise InputError(f"a column has two roles: {declared}")
    keep = [c for c in columns if c in declared]
    frame = df.copy()
    frame.columns = columns
    text = {c: [cell_text(v) for v in frame[c].tolist()] for c in keep}
    hierarchies = {q: _hierarchy(q, spec, list(dict.fromkeys(text[q]))) for q, spec in zip(qis, qi.values())}
    if sensitive is not None and sensitive_hierarchy is not None:
        hierarchies[sensitive] = _hierarchy(sensitive, sensitive_hierarchy, list(dict.fromkeys(text[sensitive])))
    config = _config(qis, k, sensitive, {"l_diversity": l_diversity, "t_closeness": t_closeness, **models},
                     suppression, metric, hierarchies.get(sensitive) if sensitive is not None else None, weights)
    table = EncodedTable(keep, np.zeros((len(frame), 0), dtype=np.int32), []) if not keep else \
        EncodedTable.from_rows(keep, list(zip(*(text[c] for c in keep))) if len(frame) else [])
    values = {name: _numbers(name, text[name], frame.index) for name in functions}
    sampled = config.model("dp") is not None
    result = release(table, hierarchies, config) if sampled else anonymize(table, hierarchies, config)
    report_config = config
    if sampled:  # a DP release holds the sampled rows only; the report judges them as k-anonymity
        frame = frame.iloc[result.released]
        table, report_config = sampled_view(table, config, result)
    aggregated = {}
    if functions:
        rows = result.released
        output, aggregated = aggregate_table(
            result.output, qis, ~np.asarray(result.suppressed, dtype=bool),
            {n: (v if rows is None else v[rows]) for n, v in values.items()}, functions)
        result = dataclasses.replace(result, output=output)
    suppressed = np.asarray(result.suppressed, dtype=bool)
    out = {}
    for c in keep:
        if c in qis:
            ci = result.output.column_index(c)
            values = [result.output.dictionaries[ci][code] for code in result.output.codes[:, ci].tolist()]
            level = result.transformation[c]
            _, level_dicts = hierarchies[c].code_map(table.dictionaries[table.column_index(c)])
            out[c] = _typed(pd, frame[c], values, level, suppressed, level_dicts[level])
        elif c in aggregated:
            column = aggregated[c]
            out[c] = pd.Series(column.texts() if column.function == "interval" else column.numbers(),
                               index=frame.index, name=c, dtype=object if column.function == "interval" else float)
            if column.function == "interval":
                out[c][suppressed] = None
        else:
            out[c] = frame[c]
    result_frame = pd.DataFrame(out, index=frame.index)[keep]
    report = Report(result, report_config, hierarchies, table,
                    pd.Series(suppressed, index=frame.index, name="suppressed"),
                    dropped_columns=[c for c in columns if c not in declared],
                    aggregation={n: dict(x.loss) for n, x in aggregated.items()})
    return result_frame, report


def _numbers(name: str, texts: list[str], index: Any) -> np.ndarray:
    """An aggregated column as floats; InputError naming the row (index label) and the value."""
    numbers, bad = parse_numbers(texts)
    if bad is not None:
        raise InputError(f"anonymize_frame: column {name!r}, row {list(index)[bad]!r}: aggregated columns must hold "
                         f"numbers, got {texts[bad][:40]!r}")
    return numbers
