"""(ε, δ)-differential privacy of a microdata release, by SafePub (Bild, Kuhn, Prasser, PoPETs 2018).

Unlike the other models this one is not a test of classes: it is a randomized algorithm
(`engine/safepub.py`). Every row is kept with probability β; the exponential mechanism picks
a transformation in `steps` draws over the generalization lattice; the sample is generalized
and every class below k rows is suppressed. The model holds the parameters and derives the
rest (`dp/parameters.py`):

* ε = ε_anon + ε_search: ε_search (default a tenth of ε) is spent by the search, split evenly
  over its steps; ε_anon buys the sampling probability β = 1 - e^(-ε_anon);
* k is the smallest integer whose δ(k) for (ε_anon, β) is at most δ.

The result is a draw, not an optimum: two runs on the same table give different releases.

Its criterion (k-anonymity with the derived k) is only ever applied by the SafePub release,
which draws the sample first: applied by an optimal search to the whole table it would give
no differential privacy at all, so `criterion()` refuses every other caller.

What each party learns in the protocols (`protocols/dp/release.py`): every primary samples its
rows before anything leaves it (horizontally on its own; vertically by a keyed PRF of the TID,
so that all keep the same persons) and announces no row count. A's master and B's helper then
see what they see in an ordinary run over the sampled rows
only, and draw the transformation. C's helper never sees the class sizes the scores need, so
C's key holder scores each step's candidates from the sizes it decrypts and draws
(`protocols/c/dp_release.py`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Mapping

from fedanon.dp.parameters import SafePubParameters
from fedanon.errors import InputError
from fedanon.model.criterion import Criterion
from fedanon.model.registry import ClassView, ParseContext, PrivacyModel, number, register, table_value

DEFAULT_STEPS = 100
DEFAULT_SEARCH_SHARE = 0.1   # of ε, when no search budget is given
FIELDS = ("epsilon", "delta", "steps", "search_budget", "final", "seed")
#: which drawn transformation is released: the best-scoring one (SafePub's reference
#: implementation) or the last one drawn (a function of the draws alone)
FINAL_CHOICES = ("best", "last")


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise InputError(f"{what}: {value!r} is not an integer")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return int(str(value).strip())
    except ValueError:
        raise InputError(f"{what}: {value!r} is not an integer") from None


@register
@dataclass
class DifferentialPrivacy(PrivacyModel):
    """(ε, δ)-DP release by SafePub: `--dp EPSILON,DELTA` with `--dp-steps`, `--dp-search-budget`."""

    epsilon: float
    delta: float
    steps: int = DEFAULT_STEPS
    search_budget: float | None = None   # ε_search; None = DEFAULT_SEARCH_SHARE·ε
    final: str = "best"                  # one of FINAL_CHOICES
    seed: int | None = None              # tests only: repeatable draws, not private

    key = "dp"
    flag = "--dp"
    metavar = "EPSILON,DELTA"
    help = ("(epsilon, delta)-differentially private release (SafePub): rows sampled, transformation "
            "drawn by the exponential mechanism, classes below the derived k suppressed")
    options = {
        "steps": ("--dp-steps", "N", f"exponential-mechanism draws of the --dp search (default {DEFAULT_STEPS})"),
        "search_budget": ("--dp-search-budget", "EPSILON",
                          f"part of the --dp epsilon spent by the search (default {DEFAULT_SEARCH_SHARE:g} x epsilon)"),
        "final": ("--dp-final", "best|last",
                  "which drawn transformation the --dp release uses: the best-scoring one, as SafePub's "
                  "reference implementation (default), or the last one drawn"),
        "seed": ("--seed", "N", "seed the --dp draws so a run can be repeated: FOR TESTS ONLY, not private"),
    }

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "DifferentialPrivacy":
        where = f"{cls.flag} {value!r}" if ctx.source == "command line" else f"{ctx.source}: {cls.key}"
        if isinstance(value, str):
            parts = [p.strip() for p in value.split(",")]
            if len(parts) != 2 or not all(parts):
                raise InputError(f"{where}: expected EPSILON,DELTA, e.g. 1,1e-6")
            entries: dict[str, Any] = {"epsilon": parts[0], "delta": parts[1]}
        elif isinstance(value, Mapping):
            entries = table_value(value, cls.key, FIELDS, ctx)
            missing = [f for f in ("epsilon", "delta") if f not in entries]
            if missing:
                raise InputError(f"{ctx.source}: [{cls.key}] needs {' and '.join(missing)}")
        else:
            raise InputError(f"{where}: expected \"EPSILON,DELTA\" or a table with epsilon and delta")
        entries.update(ctx.options)
        model = cls(
            epsilon=number(entries["epsilon"], f"{where}: epsilon"),
            delta=number(entries["delta"], f"{where}: delta"),
            steps=_integer(entries.get("steps", DEFAULT_STEPS), "--dp-steps"),
            search_budget=None if entries.get("search_budget") is None
            else number(entries["search_budget"], "--dp-search-budget"),
            final=str(entries.get("final", "best")).strip(),
            seed=None if entries.get("seed") is None else _integer(entries["seed"], "--seed"),
        )
        model.check()
        return model

    def check(self) -> None:
        """The parameters alone (no config): one InputError naming the setting."""
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise InputError(f"--dp: epsilon must be a positive number, got {self.epsilon!r}")
        if not (0 < self.delta < 1):
            raise InputError(f"--dp: delta must be in (0, 1), got {self.delta!r}")
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise InputError(f"--dp-steps must be an integer >= 1, got {self.steps!r}")
        budget = self.epsilon_search
        if not (math.isfinite(budget) and 0 < budget < self.epsilon):
            raise InputError(f"--dp-search-budget must be in (0, epsilon={self.epsilon:g}), got {budget!r}")
        if self.final not in FINAL_CHOICES:
            raise InputError(f"--dp-final must be one of {', '.join(FINAL_CHOICES)}, got {self.final!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise InputError(f"--seed must be an integer >= 0, got {self.seed!r}")

    @property
    def epsilon_search(self) -> float:
        return DEFAULT_SEARCH_SHARE * self.epsilon if self.search_budget is None else float(self.search_budget)

    def parameters(self) -> SafePubParameters:
        """The budget split, β and k this model's release uses."""
        return SafePubParameters(float(self.epsilon), float(self.delta), self.epsilon_search, int(self.steps))

    def validate(self, config: Any) -> None:
        self.check()
        others = [m.key for m in config.models if m is not self]
        if others:
            raise InputError(f"--dp cannot be combined with other privacy models ({', '.join(others)}): "
                             "SafePub's guarantee covers k-anonymity with suppression only")

    def criterion(self) -> Criterion:
        raise InputError("--dp releases are made by `fedanon anonymize` and `anonymize_frame` only "
                         "(and by Protocols A, B and C); this command does not support differential privacy")

    def violation(self, view: ClassView) -> str | None:
        k = self.parameters().k
        return None if view.size >= k else f"class of {view.size} rows < derived k={k}"

    def describe(self) -> str:
        return f"({self.epsilon:g}, {self.delta:g})-differential privacy (SafePub)"
