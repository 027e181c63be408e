"""From command-line flags and/or a TOML run file to an AnonymizationConfig.

Why a module of its own: `fedanon anonymize` and the protocol commands
(`fedanon simulate`, `fedanon run`) describe the privacy model with the very same
flags, so the parsing, the TOML format and — most importantly — the error
messages for bad settings live in one place.

Precedence: built-in defaults < TOML file < command-line flags. Relative paths
inside a TOML file are resolved against the TOML file's folder, so a run file
can be moved together with its data.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from fedanon.errors import InputError, clip
from fedanon.model.config import DEFAULT_METRIC, AnonymizationConfig
from fedanon.model.metrics.registry import metric_names
from fedanon.model.registry import ParseContext, model_types
from fedanon.kit.tomlfile import load_toml_file
from fedanon.kit.suggest import check_known_keys
from fedanon.microagg.classwise import FUNCTIONS


class PrivacySpec(NamedTuple):
    """What `config_from_args` returns; unpacks as the 4-tuple of the API contract."""

    config: AnonymizationConfig
    hierarchy_paths: dict[str, Path]   # QI (and sensitive attribute, if given) -> hierarchy CSV
    sensitive: str | None              # the (first) sensitive attribute, if any; all: config.sensitive_attributes
    subset_path: Path | None           # δ-presence research subset CSV, if any


@dataclass
class RunSpec:
    """Everything `fedanon anonymize` needs beyond the privacy model."""

    privacy: PrivacySpec
    input: Path | None
    output: Path | None
    report: Path | None
    delimiter: str
    drop_suppressed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    encoding: str = "utf-8"
    hierarchy_delimiter: str | None = None      # None: the data file's delimiter
    insensitive: list[str] = field(default_factory=list)
    aggregate: dict[str, str] = field(default_factory=dict)  # column -> function (mean, median, interval, mode)

    @property
    def hierarchy_sep(self) -> str:
        return self.hierarchy_delimiter or self.delimiter

    def declared_columns(self) -> list[str]:
        """Every column given a role: QIs, the sensitive attribute, insensitive and aggregated columns."""
        config, _paths, _sensitive, _subset = self.privacy
        out = list(config.quasi_identifiers)
        out.extend(a for a in config.sensitive_attributes if a not in out)
        out += [c for c in self.insensitive if c not in out]
        return out + [c for c in self.aggregate if c not in out]


# --------------------------------------------------------------------------- argparse
def add_privacy_arguments(parser: argparse.ArgumentParser, *, with_config: bool = True) -> None:
    """Add the privacy-model flags shared by every command that anonymizes.

    Every default is None so that `config_from_args` can tell "not given" from
    "given" and let the TOML file fill the gaps.
    """
    g = parser.add_argument_group("privacy model")
    if with_config:
        g.add_argument("--config", metavar="RUN.toml", default=None,
                       help="read the run from a TOML file; flags given on the command line override it")
    g.add_argument("--qi", action="append", metavar="NAME=HIERARCHY.csv", default=None,
                   help="quasi-identifier and its ARX-format hierarchy (repeat; order = tie-break order)")
    g.add_argument("--sensitive", action="append", metavar="NAME[=HIERARCHY.csv]", default=None,
                   help="sensitive attribute of the models that judge one (l-diversity, t-closeness, ...); "
                        "(the hierarchy is needed for hierarchical t-closeness). Repeat for several: each "
                        "model then names its attribute, e.g. --l-diversity diagnosis=distinct:2")
    g.add_argument("--k", type=int, default=None, metavar="K", help="k-anonymity (default 1 = off)")
    for model in model_types().values():
        g.add_argument(model.flag, dest=model.key, action="append", default=None, metavar=model.metavar,
                       help=model.help + (" (repeatable; with several --sensitive: NAME=" + model.metavar + ")"
                                          if model.uses_sensitive else ""))
        for name, (flag, metavar, text) in model.options.items():
            g.add_argument(flag, dest=option_dest(model.key, name), default=None, metavar=metavar, help=text)
    g.add_argument("--suppression", type=float, default=None, metavar="FRACTION",
                   help="fraction of rows that may be suppressed, in [0, 1) (default 0)")
    g.add_argument("--metric", default=None, metavar="NAME",
                   help=f"information-loss metric: {', '.join(metric_names())} (default {DEFAULT_METRIC})")
    g.add_argument("--weight", action="append", default=None, metavar="QI=W",
                   help="weight of a quasi-identifier in the information-loss metric (repeat; QIs not named "
                        "weigh 1; metrics that sum over the QIs only, e.g. loss, precision, entropy, height)")
    g.add_argument("--insensitive", action="append", default=None, metavar="NAME",
                   help="a column released unchanged (repeat). Columns given no role (not a QI, "
                        "sensitive, insensitive or aggregated) are identifying and are removed from the output")
    g.add_argument("--aggregate", action="append", default=None, metavar="NAME=FUNCTION",
                   help="a numeric column released as its equivalence class's "
                        f"{', '.join(FUNCTIONS[:-1])} or {FUNCTIONS[-1]} (repeat); not a quasi-identifier of "
                        "the search: the classes come from the quasi-identifiers' generalization, suppressed "
                        "rows get '*'")
    csv_group = parser.add_argument_group("CSV format")
    csv_group.add_argument("--delimiter", default=None, metavar="CHAR",
                           help="field delimiter of the data files (default ';'; \\t or tab for a tab)")
    csv_group.add_argument("--hierarchy-delimiter", default=None, metavar="CHAR",
                           help="field delimiter of the hierarchy files (default: --delimiter)")
    csv_group.add_argument("--encoding", default=None, metavar="NAME",
                           help="text encoding of all input files (default utf-8; a BOM is accepted), "
                                "e.g. latin-1, cp1252")


def option_dest(key: str, name: str) -> str:
    """The argparse destination of a model's further flag (`PrivacyModel.options`)."""
    return f"{key}__{name}"


# --------------------------------------------------------------------------- parsing
def _float(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{what}: {text!r} is not a number") from None


def parse_qi(text: str, base: Path | None = None) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise InputError(f"--qi {text!r}: expected NAME=HIERARCHY.csv")
    return name.strip(), _resolve(path.strip(), base)


def parse_weights(texts: list[str]) -> dict[str, float]:
    """`--weight QI=W` flags as QI -> weight (the config checks the QIs and values)."""
    out: dict[str, float] = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InputError(f"--weight {text!r}: expected QI=WEIGHT, e.g. age=2")
        if name.strip() in out:
            raise InputError(f"--weight {name.strip()} given twice")
        out[name.strip()] = _float(value.strip(), f"--weight {text!r}")
    return out


def parse_sensitive(text: str, base: Path | None = None) -> tuple[str, Path | None]:
    name, sep, path = text.partition("=")
    if not name.strip():
        raise InputError(f"--sensitive {text!r}: expected NAME or NAME=HIERARCHY.csv")
    return name.strip(), (_resolve(path.strip(), base) if sep and path.strip() else None)


def parse_aggregate(text: str) -> tuple[str, str, str]:
    """--aggregate NAME=FUNCTION as (name, function, where it was given)."""
    name, sep, function = text.partition("=")
    if not sep or not name.strip() or not function.strip():
        raise InputError(f"--aggregate {clip(text)!r}: expected NAME=FUNCTION ({', '.join(FUNCTIONS)}), "
                         "e.g. --aggregate age=mean")
    return name.strip(), function.strip(), f"--aggregate {clip(text)}"


def _aggregate_roles(entries: list[tuple[str, str, str]], config: AnonymizationConfig,
                     insensitive: list[str]) -> dict[str, str]:
    """Column -> function, checked: a known function, a column given once and no other role."""
    out: dict[str, str] = {}
    for name, function, where in entries:
        if function not in FUNCTIONS:
            raise InputError(f"{where}: unknown aggregate function {clip(function)!r} for column {clip(name)!r}; "
                             f"known: {', '.join(FUNCTIONS)}")
        other = ("a quasi-identifier" if name in config.quasi_identifiers else
                 "a sensitive attribute" if name in config.sensitive_attributes else
                 "insensitive" if name in insensitive else None)
        if other:
            raise InputError(f"{where}: column {clip(name)!r} is declared aggregated and also {other}; "
                             "a column has one role")
        if name in out:
            raise InputError(f"{where}: column {clip(name)!r} is aggregated twice")
        out[name] = function
    return out


def _resolve(path: str | Path, base: Path | None) -> Path:
    if "\0" in str(path):
        raise InputError(f"path {clip(str(path).replace(chr(0), '<NUL>'))!r} contains a NUL character")
    p = Path(path).expanduser()
    return p if p.is_absolute() or base is None else base / p


# --------------------------------------------------------------------------- TOML
def load_toml(path: str | Path) -> dict[str, Any]:
    return load_toml_file(path, "run file")


_BASE_TOML_KEYS = {"input", "output", "report", "delimiter", "k", "suppression", "metric", "qi",
                   "sensitive", "drop_suppressed", "insensitive", "encoding", "hierarchy_delimiter",
                   "aggregate", "weights"}


def toml_keys() -> set[str]:
    """Every key a run file may hold: the run's own and one per registered privacy model."""
    return _BASE_TOML_KEYS | set(model_types())

# the type each scalar TOML key must have (TOML has real booleans and numbers: a quoted
# "false" is a string, and taking it as true would silently change the release)
_TOML_TYPES: dict[str, tuple[type, ...]] = {
    "delimiter": (str,), "hierarchy_delimiter": (str,), "encoding": (str,), "metric": (str,),
    "k": (int,), "suppression": (int, float), "drop_suppressed": (bool,),
    "input": (str,), "output": (str,), "report": (str,),
}


def _check_toml_type(source: Path, key: str, value: Any) -> None:
    kinds = _TOML_TYPES.get(key)
    if kinds is None:
        return
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        names = " or ".join("boolean (true/false, unquoted)" if k is bool else
                            {int: "integer", float: "number", str: "string"}[k] for k in kinds)
        raise InputError(f"{source}: {key} must be a {names}, got {str(value)[:200]!r}")


def _toml_settings(doc: dict[str, Any], source: Path, strict: bool = True) -> dict[str, Any]:
    """Normalize a TOML run file into the same shapes the flags produce.

    `strict=False` lets other commands keep their own keys (e.g. parties) in
    the same run file; `fedanon anonymize` rejects unknown keys to catch typos.
    """
    base = source.parent
    if strict:
        check_known_keys(source, "", doc, toml_keys(), "setting")
    out: dict[str, Any] = {}
    for key, value in doc.items():
        _check_toml_type(source, key, value)
    for key in ("input", "output", "report"):
        if key in doc:
            out[key] = _resolve(str(doc[key]), base)
    for key in ("delimiter", "hierarchy_delimiter", "encoding", "metric", "k", "suppression", "drop_suppressed"):
        if key in doc:
            out[key] = doc[key]
    if "insensitive" in doc:
        names = doc["insensitive"]
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise InputError(f"{source}: insensitive must be a list of column names, e.g. [\"comment\"]")
        out["insensitive"] = list(names)
    if "aggregate" in doc:
        table = doc["aggregate"]
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise InputError(f"{source}: [aggregate] must be a table of NAME = \"FUNCTION\" "
                             f"({', '.join(FUNCTIONS)}), e.g. age = \"mean\"")
        out["aggregate"] = [(str(name), str(function), str(source)) for name, function in table.items()]
    if "weights" in doc:
        weights = doc["weights"]
        if not isinstance(weights, dict) or not all(isinstance(w, (int, float)) and not isinstance(w, bool)
                                                    for w in weights.values()):
            raise InputError(f"{source}: [weights] must be a table of QI = number, e.g. age = 2")
        out["weights"] = {str(q): float(w) for q, w in weights.items()}
    if "qi" in doc:
        qi = doc["qi"]
        if not isinstance(qi, dict):
            raise InputError(f"{source}: [qi] must be a table of NAME = \"HIERARCHY.csv\"")
        out["qi"] = [(str(name), _resolve(str(p), base)) for name, p in qi.items()]
    if "sensitive" in doc:
        entries = doc["sensitive"] if isinstance(doc["sensitive"], list) else [doc["sensitive"]]
        out["sensitive"] = []
        for s in entries:
            if isinstance(s, str):
                out["sensitive"].append(parse_sensitive(s, base))
            elif isinstance(s, dict) and "name" in s:
                out["sensitive"].append((str(s["name"]), _resolve(str(s["hierarchy"]), base) if s.get("hierarchy") else None))
            else:
                raise InputError(f"{source}: sensitive must be \"NAME[=HIERARCHY.csv]\", a table with name/hierarchy, "
                                 "or a list of those")
    for key in model_types():
        if key in doc:
            # a list holds several settings of the model (one per sensitive attribute)
            out[key] = (doc[key] if isinstance(doc[key], list) else [doc[key]], source)
    return out


# --------------------------------------------------------------------------- merge
def _merged_settings(args: argparse.Namespace, strict: bool = True) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    cfg_path = getattr(args, "config", None)
    if cfg_path:
        source = Path(cfg_path)
        settings.update(_toml_settings(load_toml(source), source, strict))
    # command line overrides
    if getattr(args, "qi", None):
        settings["qi"] = [parse_qi(t) for t in args.qi]
    if getattr(args, "sensitive", None):
        settings["sensitive"] = [parse_sensitive(text) for text in args.sensitive]
    if getattr(args, "insensitive", None):
        settings["insensitive"] = list(args.insensitive)
    if getattr(args, "aggregate", None):
        settings["aggregate"] = [parse_aggregate(text) for text in args.aggregate]
    if getattr(args, "weight", None):
        settings["weights"] = parse_weights(args.weight)
    for key in ("k", "suppression", "metric", "delimiter", "hierarchy_delimiter", "encoding"):
        value = getattr(args, key, None)
        if value is not None:
            settings[key] = value
    for key, model in model_types().items():
        value = getattr(args, key, None)
        if value is not None:
            settings[key] = (value, None)
        options = {name: getattr(args, option_dest(key, name)) for name in model.options
                   if getattr(args, option_dest(key, name), None) is not None}
        if options:
            if value is None and key not in settings:
                flags = ", ".join(model.options[n][0] for n in options)
                raise InputError(f"{flags} given without {model.flag}")
            settings[f"{key}:options"] = options
    for key in ("input", "output", "report"):
        value = getattr(args, key, None)
        if value is not None:
            settings[key] = Path(value)
    if getattr(args, "drop_suppressed", False):
        settings["drop_suppressed"] = True
    return settings



def _privacy_from_settings(settings: dict[str, Any]) -> PrivacySpec:
    qi = settings.get("qi") or []
    if not qi:
        raise InputError("no quasi-identifiers: give --qi NAME=HIERARCHY.csv (or [qi] in the run file)")
    names = [name for name, _ in qi]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"quasi-identifier(s) given twice: {', '.join(dup)}")
    hierarchy_paths: dict[str, Path] = dict(qi)
    declared: dict[str, Path | None] = {}
    for name, path in settings.get("sensitive") or []:
        if name in declared:
            raise InputError(f"sensitive attribute {name!r} given twice")
        declared[name] = path
        if path is not None:
            hierarchy_paths[name] = path
    sensitive = next(iter(declared), None)

    k = settings.get("k", 1)
    if isinstance(k, float) and k == int(k):
        k = int(k)
    suppression = settings.get("suppression", 0.0)
    if isinstance(suppression, int) and not isinstance(suppression, bool):
        suppression = float(suppression)
    metric = settings.get("metric", DEFAULT_METRIC)

    models = []
    subset_path = None
    for key, model_type in model_types().items():
        if key not in settings:
            continue
        values, source = settings[key]
        for value in values:
            attribute, value = _attribute_of(model_type, value, declared)
            ctx = ParseContext(sensitive=attribute, sensitive_hierarchy=declared.get(attribute) if attribute else None,
                               base=source.parent if source is not None else None,
                               source=str(source) if source is not None else "command line",
                               options=dict(settings.get(f"{key}:options", {})))
            models.append(model_type.parse(value, ctx))
            subset_path = ctx.files.get("subset", subset_path)
    used = {getattr(m, "attribute", None) for m in models if m.uses_sensitive}
    for name in declared:
        if name not in used:
            users = ", ".join(m.flag for m in model_types().values() if m.uses_sensitive)
            raise InputError(f"--sensitive {name} given but no privacy model uses it ({users})")

    config = AnonymizationConfig(quasi_identifiers=names, k=k, suppression=suppression, metric=metric,
                                 models=models, weights=settings.get("weights"))
    config.validate()
    return PrivacySpec(config, hierarchy_paths, sensitive, subset_path)


def _attribute_of(model_type: type, value: Any, declared: dict[str, Path | None]) -> tuple[str | None, Any]:
    """Which declared sensitive attribute a model setting judges, and the setting without it.

    With one sensitive attribute a setting may leave it out (`--l-diversity distinct:2`); with
    several it names it: `NAME=SETTING` on the command line or in a TOML string, or
    `attribute = "NAME"` in a TOML table."""
    if not model_type.uses_sensitive:
        return None, value
    if isinstance(value, str):
        name, sep, rest = value.partition("=")
        if sep and name.strip() in declared:
            return name.strip(), rest
    elif isinstance(value, dict) and "attribute" in value:
        name = str(value["attribute"])
        if name not in declared:
            raise InputError(f"{model_type.flag}: attribute {name!r} is not a declared sensitive attribute "
                             f"({', '.join(declared) or 'none: add --sensitive NAME'})")
        return name, {k: v for k, v in value.items() if k != "attribute"}
    if len(declared) > 1:
        raise InputError(f"{model_type.flag} {value!r}: several sensitive attributes are declared "
                         f"({', '.join(declared)}); name one, e.g. {model_type.flag} {next(iter(declared))}=...")
    return next(iter(declared), None), value


def config_from_args(args: argparse.Namespace, *, strict: bool = False) -> PrivacySpec:
    """(AnonymizationConfig, hierarchy paths, sensitive attribute, subset path).

    Non-strict by default: a command that shares its run file with other
    settings only takes the privacy keys from it.
    """
    return _privacy_from_settings(_merged_settings(args, strict))


def run_from_args(args: argparse.Namespace) -> RunSpec:
    """The privacy model plus the input/output files of `fedanon anonymize`."""
    from fedanon.data.io.delimited import check_encoding, parse_delimiter

    settings = _merged_settings(args)
    privacy = _privacy_from_settings(settings)
    delimiter = parse_delimiter(str(settings.get("delimiter", ";")))
    hierarchy_delimiter = settings.get("hierarchy_delimiter")
    if hierarchy_delimiter is not None:
        hierarchy_delimiter = parse_delimiter(str(hierarchy_delimiter), "--hierarchy-delimiter")
    insensitive = list(settings.get("insensitive", []))
    config, _paths, sensitive, _subset = privacy
    for name in insensitive:
        if name in config.quasi_identifiers or name in config.sensitive_attributes:
            raise InputError(f"column {name!r} is declared insensitive and also as a "
                             f"{'quasi-identifier' if name in config.quasi_identifiers else 'sensitive attribute'}")
    dup = sorted({n for n in insensitive if insensitive.count(n) > 1})
    if dup:
        raise InputError(f"insensitive column(s) given twice: {', '.join(dup)}")
    return RunSpec(
        privacy=privacy,
        input=settings.get("input"),
        output=settings.get("output"),
        report=settings.get("report"),
        delimiter=delimiter,
        drop_suppressed=bool(settings.get("drop_suppressed", False)),
        encoding=check_encoding(str(settings.get("encoding", "utf-8"))),
        hierarchy_delimiter=hierarchy_delimiter,
        insensitive=insensitive,
        aggregate=_aggregate_roles(list(settings.get("aggregate", [])), config, insensitive),
    )
