"""Property: for random tables, splits and models, Protocol B equals the centralized engine.

Rows are drawn from the example's value domains (so the bundled hierarchies apply), the
split, party count, k, suppression and metric vary; the in-memory transport keeps each
case in the millisecond range.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedanon.model.config import AnonymizationConfig

from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.engine.result import NoSolutionError
from fedanon.protocols.kit.api import RunSettings
from fedanon.protocols.sim.equivalence import centralized, differences
from fedanon.protocols.sim.local_run import run_in_memory
from fedanon.protocols.sim.split import split_horizontal, split_vertical
from protocol_cases import EX_ATTRS, example_hierarchies, example_row_strategy
from reference import Model, Reference

ATTRS = EX_ATTRS
HIERARCHIES = example_hierarchies()
row_strategy = example_row_strategy(HIERARCHIES)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(row_strategy, min_size=4, max_size=40), distribution=st.sampled_from(["horizontal", "vertical"]),
       parties=st.integers(2, 3), k=st.integers(1, 4), suppression=st.sampled_from([0.0, 0.1, 0.3]),
       metric=st.sampled_from(["loss", "aecs", "discernibility", "nonuniform-entropy", "precision"]),
       diverse=st.booleans())
def test_random_tables_equal_centralized(rows, distribution, parties, k, suppression, metric, diverse) -> None:
    qis = ["age", "sex", "zipcode"]
    config = AnonymizationConfig(qis, k=k, suppression=suppression, metric=metric,
                                 l_diversity=LDiversity("distinct", 2, "diagnosis") if diverse else None)
    try:
        central = centralized(ATTRS, rows, HIERARCHIES, config)
    except NoSolutionError:
        central = None
    split = split_horizontal if distribution == "horizontal" else split_vertical
    if distribution == "horizontal" and len(rows) < parties:
        return
    shares = split(ATTRS, rows, parties)
    local = {f"p{i + 1}": s.local_data(HIERARCHIES) for i, s in enumerate(shares)}
    roles = {**{p: "primary" for p in local}, "helper": "helper"}
    run = run_in_memory(RunSettings("prop", "B", distribution, config, roles, "p1", {}), local, timeout_s=60)
    best = Reference(ATTRS, rows, {a: [[v.decode() for v in r] for r in h.rows] for a, h in HIERARCHIES.items()},
                     Model(qis, k=k, suppression=suppression, metric=metric,
                           l_diversity=("distinct", 2, None, "diagnosis") if diverse else None)).optimum()
    assert (best is None) == (central is None)
    if central is None:
        assert set(run.errors) == set(roles) and all(isinstance(e, NoSolutionError) for e in run.errors.values())
        return
    assert not run.errors, run.errors
    out = run.outcomes["p1"]
    assert differences(central, out.report["transformation"], out.output_columns, out.output_rows) == []
    assert out.report["information_loss"] == central.result.information_loss or np.isclose(
        out.report["information_loss"], central.result.information_loss)
    # the centralized side is the same engine: the independent reference must agree too
    assert out.report["transformation"] == dict(zip(qis, best.levels))
    assert np.isclose(out.report["information_loss"], best.loss, rtol=1e-9, atol=1e-9)
