"""The result recipient's own check of the decrypted result, before it accepts it.

Why: in the semi-honest model the helper returns what the engine produced. A helper that
deviates could instead return, say, one primary's own rows un-anonymized; the recipient
would decrypt them and write them out with exit code 0. The recipient holds what it needs
to notice, so it checks, independently of the engine's code:

1. the output satisfies the run's privacy model: the independent verifier
   (`engine/verify.py`) runs on the decrypted output itself, each output value standing
   for itself (k, ℓ, t over the released classes, the suppression limit, the suppression
   mask). With δ-presence every model is judged on population classes, which the
   recipient does not see: such runs are not re-checked here (a known gap);
2. its own rows are in the output, each generalized at the reported transformation with
   its own hierarchies or suppressed, every other cell unchanged (vertical: projected
   onto the columns it holds); with δ-presence only when it holds the subset flags.

Problems come back as a `LocalProblem`: the public part counts and names columns, the
private part (for this party's log) may quote values.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Sequence

from fedanon.data.table import EncodedTable
from fedanon.model.config import AnonymizationConfig
from fedanon.oracle.verify import verify_anonymized
from fedanon.protocols.kit.api import LocalData
from fedanon.protocols.kit.validation import LocalProblem

STAR = "*"
_SHOWN = 3


def check_result(me: str, local: LocalData, config: AnonymizationConfig, distribution: str,
                 output: EncodedTable, suppressed: Sequence[bool] | None,
                 transformation: dict[str, int] | None, timings: dict[str, Any] | None = None,
                 may_be_absent: int = 0) -> list[LocalProblem]:
    """Both checks; with `timings` (the role's report) also its wall time as `result_check_s`, so that
    benchmarks can tell this safeguard's cost from the protocol's own (it is linear in rows, in Python).
    `may_be_absent`: how many own rows may rightly be missing (a hybrid join dropped persons that
    some column group lacks, and this party cannot tell which).

    The checks read the output as rows of strings, built here and dropped afterwards: the
    verifier is a plain-Python reading of the definitions that shares no code with the engine's
    coded tables, and that independence is what makes it a check."""
    started = time.perf_counter()
    columns, rows = list(output.columns), output.text_rows()
    problems = _privacy(config, local, columns, rows, suppressed)
    problems += _own_rows(me, local, config, distribution, columns, rows, transformation, may_be_absent)
    if timings is not None:
        timings["result_check_s"] = round(time.perf_counter() - started, 6)
    return problems


def _privacy(config: AnonymizationConfig, local: LocalData, columns: Sequence[str], rows: Sequence[Sequence[str]],
             suppressed: Sequence[bool] | None) -> list[LocalProblem]:
    qis = list(config.quasi_identifiers)
    missing = [q for q in qis if q not in columns]
    if missing:
        msg = f"the result lacks quasi-identifier column(s) {missing}"
        return [LocalProblem(msg, msg)]
    if config.needs_subset:
        return []  # every model is judged on population classes, which the recipient does not see
    as_dict = config.to_dict()
    hierarchies: dict[str, Any] = {}
    for q in qis:  # each output value stands for itself: level 0 is the published value
        index = list(columns).index(q)
        hierarchies[q] = [[v] for v in sorted({row[index] for row in rows} | {STAR})]
    for model in config.models:
        attribute = model.needs_hierarchy()
        if attribute is None:
            continue
        if attribute in local.hierarchies:
            hierarchies[attribute] = local.hierarchies[attribute]
        else:  # vertical: another party holds that column's hierarchy; the other models are still checked
            as_dict["models"] = [m for m in as_dict["models"] if m["model"] != model.key]
    found = verify_anonymized(list(columns), rows, list(columns), rows, as_dict, hierarchies,
                              transformation={q: 0 for q in qis},
                              suppressed=None if suppressed is None else [bool(s) for s in suppressed])
    if not found:
        return []
    return [LocalProblem(
        f"the decrypted result violates the run's privacy model ({len(found)} problem(s), e.g. "
        f"{_kind(found[0])}); it was not accepted",
        "the decrypted result violates the run's privacy model: " + "; ".join(found[:_SHOWN]),
    )]


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _kind(problem: str) -> str:
    """A verifier message without the class label (which quotes values)."""
    if ": " in problem and problem.startswith("class "):
        return "a class " + problem.split(": ", 1)[1].split(" (")[0]
    return problem.split(":")[0][:80]


def _own_rows(me: str, local: LocalData, config: AnonymizationConfig, distribution: str, columns: Sequence[str],
              rows: Sequence[Sequence[str]], transformation: dict[str, int] | None,
              may_be_absent: int = 0) -> list[LocalProblem]:
    if transformation is None:
        msg = "the result names no transformation, so the recipient cannot check its own rows"
        return [LocalProblem(msg, msg)]
    mine = [c for c in columns if c in local.columns]
    if not mine:
        return []
    own_rows = local.rows
    if config.needs_subset:
        if local.research_subset is None:
            return []  # our rows may rightly be absent; the subset holder checks its own
        own_rows = [r for r, f in zip(local.rows, local.research_subset) if f]
    qis = set(config.quasi_identifiers)
    at = {c: local.columns.index(c) for c in mine}
    out_at = [list(columns).index(c) for c in mine]
    generalize: dict[str, dict[str, str]] = {}
    for c in mine:
        if c in qis:
            level = transformation.get(c)
            hierarchy = local.hierarchies.get(c)
            if level is None or hierarchy is None or not 0 <= level < hierarchy.height:
                msg = f"the reported level {level!r} of column {c!r} is not a level of its hierarchy"
                return [LocalProblem(msg, msg)]
            generalize[c] = {_text(row[0]): _text(row[level]) for row in hierarchy.rows}
    published = Counter(tuple(row[i] for i in out_at) for row in rows)
    absent: list[int] = []
    for line, row in enumerate(own_rows, start=1):
        expected = tuple(generalize[c].get(row[at[c]], "\0") if c in generalize else row[at[c]] for c in mine)
        hidden = tuple(STAR if c in qis else row[at[c]] for c in mine)
        for form in (expected, hidden):
            if published[form] > 0:
                published[form] -= 1
                break
        else:
            absent.append(line)
    if len(absent) <= may_be_absent:
        return []
    return [LocalProblem(
        f"party {me!r}: {len(absent)} of its own {len(own_rows)} rows are not in the result at the reported "
        f"transformation (columns {mine}); the result was not accepted",
        f"party {me!r}: own data rows {absent[:2 * _SHOWN]} are not in the result at transformation {transformation}",
    )]
