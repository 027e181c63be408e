"""The engine searches with one BLAS thread and gives the caller's setting back afterwards.

Why it matters: OpenBLAS threads busy-wait between calls, so a multi-threaded BLAS made a
1.2 M-row search burn 60 % more CPU than its wall time (fedanon.kit.threads).
"""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, anonymize
from fedanon.engine.search.heuristic import SearchLimits


def _blas_threads() -> set[int]:
    return {int(p["num_threads"]) for p in threadpool_info() if p["user_api"] == "blas"}


def _table_and_hierarchies():
    rng = np.random.default_rng(4)
    rows = [[str(rng.integers(20, 60)), str(rng.integers(0, 4))] for _ in range(300)]
    ages = sorted({r[0] for r in rows}, key=int)
    zips = sorted({r[1] for r in rows})
    hierarchies = {
        "age": Hierarchy.from_rows("age", [[a, f"{int(a) // 10 * 10}s", "*"] for a in ages]),
        "zip": Hierarchy.from_rows("zip", [[z, "*"] for z in zips]),
    }
    return EncodedTable.from_rows(["age", "zip"], rows), hierarchies


@pytest.mark.parametrize("node_budget", [None, 1])  # Flash, and the heuristic search beyond the budget
def test_search_runs_with_one_blas_thread_and_restores_the_callers(monkeypatch, node_budget):
    if not _blas_threads():
        pytest.skip("NumPy links no BLAS that threadpoolctl can see")
    import fedanon.engine.check.checker as checker_module

    seen: list[set[int]] = []
    original = checker_module.LocalChecker.evaluate

    def spy(self, *args, **kwargs):
        seen.append(_blas_threads())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(checker_module.LocalChecker, "evaluate", spy)
    table, hierarchies = _table_and_hierarchies()
    config = AnonymizationConfig(["age", "zip"], k=5, metric="loss")
    limits = SearchLimits(node_budget=node_budget) if node_budget else None
    with threadpool_limits(limits=2, user_api="blas"):  # the caller's own setting
        result = anonymize(table, hierarchies, config, limits=limits)
        after = _blas_threads()
    assert result.transformation is not None
    assert seen and all(s == {1} for s in seen), seen
    assert after == {2}
