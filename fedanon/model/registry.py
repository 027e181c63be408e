"""The registry of privacy models: what a model is, and where every entry point finds it.

A privacy model beyond k-anonymity is one module in `fedanon.model.privacy` that defines a
`PrivacyModel` subclass and decorates it with `@register`. Everything that handles models --
the command-line flags, the TOML run file, `anonymize_frame`, the JSON a protocol ships to
every party, the engine's criteria, the independent verifier, the report -- asks this
registry instead of naming models, so adding a model touches nothing else.

Why the models are found by scanning their package instead of importing them here: the
registry sits below the models (they import it to register), so it must not import them;
`model_types()` imports every module of `fedanon.model.privacy` once, on first use.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, TypeVar

from fedanon.errors import InputError
from fedanon.kit.discovery import import_submodules

if TYPE_CHECKING:  # only for annotations: the config imports this module
    from fedanon.data.hierarchy import Hierarchy
    from fedanon.model.config import AnonymizationConfig
    from fedanon.model.criterion import Criterion

PRIVACY_PACKAGE = "fedanon.model.privacy"


@dataclass
class ParseContext:
    """What parsing a model's setting may need beyond the setting itself.

    `files` collects input files a model names (e.g. δ-presence's research subset): they stay
    with the party that reads them and never enter the config that travels to other parties.
    """

    sensitive: str | None = None
    # the sensitive attribute's hierarchy: its file (flags, TOML) or the hierarchy itself
    # (anonymize_frame builds it in memory); None when the attribute has none
    sensitive_hierarchy: "Path | Hierarchy | None" = None
    base: Path | None = None            # folder relative paths are resolved against
    source: str = "command line"        # where the setting came from, for error messages
    files: dict[str, Path] = field(default_factory=dict)
    #: the model's further flags (`PrivacyModel.options`) given on the command line, by option name
    options: dict[str, str] = field(default_factory=dict)

    def require_sensitive(self) -> str:
        """The sensitive attribute a model of it is judged on, or the error that says how to name one."""
        if self.sensitive is None:
            raise InputError("l-diversity and t-closeness need a sensitive attribute: add --sensitive NAME")
        return self.sensitive

    def resolve(self, path: str) -> Path:
        if "\0" in path:
            raise InputError(f"{self.source}: path contains a NUL character")
        p = Path(path).expanduser()
        return p if p.is_absolute() or self.base is None else self.base / p


@dataclass
class ClassView:
    """One released equivalence class as the independent verifier sees it: plain Python counts
    of raw values, never the engine's statistics."""

    size: int
    sensitive_counts: dict[str, Counter]          # attribute -> raw value -> rows in the class
    overall: dict[str, dict[bytes, float]]        # attribute -> raw value -> share in the table
    subset_rows: int = 0
    generalizers: dict[str, Any] = field(default_factory=dict)  # attribute -> value -> its ancestors
    table_rows: int = 0                           # rows of the input (a sample's size, for k-map)


class PrivacyModel:
    """A privacy model's settings and its behaviour at every entry point.

    Subclasses are dataclasses holding the model's parameters (plain JSON-able values). Class
    attributes describe the model to the entry points:

    * `key`: the TOML key, the JSON key and the `anonymize_frame` keyword (e.g. "l_diversity");
    * `flag`, `metavar`, `help`: the command-line option;
    * `uses_sensitive`: judged on the sensitive attribute (its field `attribute`);
    * `needs_subset`: needs the research subset (which input rows are released);
    * `decomposes_over_shares`: judged on each class alone, so the §4.3 baselines (every party
      anonymizes its own share) can apply it;
    * `options`: further command-line flags of the model, option name -> (flag, metavar, help);
      their text reaches `parse` in `ParseContext.options` (a TOML table names them as keys).
    """

    key: ClassVar[str]
    flag: ClassVar[str]
    metavar: ClassVar[str] = "SPEC"
    help: ClassVar[str] = ""
    uses_sensitive: ClassVar[bool] = False
    needs_subset: ClassVar[bool] = False
    decomposes_over_shares: ClassVar[bool] = False
    options: ClassVar[dict[str, tuple[str, str, str]]] = {}

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "PrivacyModel":
        """The model from a flag's text or a TOML value (a string like the flag's, or a table)."""
        raise NotImplementedError

    def validate(self, config: "AnonymizationConfig") -> None:
        """Raise InputError naming the offending setting and value."""

    def criterion(self) -> "Criterion":
        """The engine's per-class test for this model."""
        raise NotImplementedError

    def needs_hierarchy(self) -> str | None:
        """An attribute (besides the QIs) whose hierarchy the model needs, if any."""
        return None

    def violation(self, view: ClassView) -> str | None:
        """The verifier's independent check of one released class: why it fails, or None.

        Written from the model's definition on raw value counts, sharing no code with
        `criterion()`, so that a bug in the vectorized criterion cannot hide itself."""
        raise NotImplementedError

    def release_violation(self, class_sizes: list[int], table_rows: int = 0) -> str | None:
        """The verifier's check of a model judged on the whole release (e.g. the average
        re-identification risk), from the sizes of the released classes and the input's row count
        (a sample's size, from which a model estimates its population): why it fails, or None.
        Class-by-class models leave it alone."""
        return None

    def records_violation(self, qis: list[str], records: list[tuple[tuple[bytes, ...], dict[str, bytes]]]
                          ) -> str | None:
        """The verifier's check of a model judged on the released rows themselves (e.g.
        LKC-privacy, on their projections onto a few QIs): per released row its QI cells (in the
        order of `qis`) and its raw sensitive values by attribute. Why it fails, or None."""
        return None

    def distributed_problem(self) -> str | None:
        """Why this setting cannot run in a distributed protocol, or None. Every protocol asks
        before any data moves (a refusal then costs nothing)."""
        return None

    def describe(self) -> str:
        """A short human-readable name with parameters, e.g. "recursive-(4,3)-diversity"."""
        return self.key

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PrivacyModel":
        try:
            return cls(**dict(d))  # type: ignore[call-arg]
        except TypeError as exc:
            raise InputError(f"malformed {cls.key} settings: {exc}") from None


_REGISTRY: dict[str, type[PrivacyModel]] = {}
M = TypeVar("M", bound=type[PrivacyModel])


def register(cls: M) -> M:
    """Class decorator: make a model known to every entry point."""
    key = cls.key
    if key in _REGISTRY and _REGISTRY[key] is not cls:
        raise RuntimeError(f"two privacy models registered as {key!r}")
    _REGISTRY[key] = cls
    return cls


def model_types() -> dict[str, type[PrivacyModel]]:
    """Every registered model by key, in a stable order (the order their modules sort in)."""
    import_submodules(PRIVACY_PACKAGE)
    return dict(_REGISTRY)


def model_type(key: str) -> type[PrivacyModel]:
    types = model_types()
    if key not in types:
        raise InputError(f"unknown privacy model {key!r}; known: {', '.join(sorted(types))}")
    return types[key]


def number(text: Any, what: str) -> float:
    """A float from a flag's text or a TOML number, with an error that names the setting."""
    if isinstance(text, bool):
        raise InputError(f"{what}: {text!r} is not a number")
    try:
        return float(text)
    except (TypeError, ValueError):
        raise InputError(f"{what}: {text!r} is not a number") from None


def table_value(value: Any, key: str, names: tuple[str, ...], ctx: ParseContext) -> dict[str, Any]:
    """A TOML table's entries `names`, with one error naming what is missing or unknown."""
    if not isinstance(value, Mapping):
        raise InputError(f"{ctx.source}: {key} must be a string or a table")
    unknown = sorted(set(value) - set(names))
    if unknown:
        raise InputError(f"{ctx.source}: [{key}] has unknown key(s) {', '.join(unknown)}; allowed: {', '.join(names)}")
    return dict(value)
