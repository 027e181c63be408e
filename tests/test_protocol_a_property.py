"""Property: for random tables, splits, party counts and models, Protocol A equals the centralized engine.

Rows are drawn from the example's value domains (so the bundled hierarchies apply); split,
party count (2-4), k, suppression, metric and an optional ℓ-diversity vary. Real EC crypto,
in-memory transport.
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

ATTRS = EX_ATTRS
HIERARCHIES = example_hierarchies()
row_strategy = example_row_strategy(HIERARCHIES)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(row_strategy, min_size=4, max_size=30), distribution=st.sampled_from(["horizontal", "vertical"]),
       parties=st.integers(2, 4), recipient=st.integers(0, 3), k=st.integers(1, 4),
       suppression=st.sampled_from([0.0, 0.1, 0.3]),
       metric=st.sampled_from(["loss", "aecs", "discernibility", "nonuniform-entropy", "precision"]),
       diverse=st.booleans())
def test_random_tables_equal_centralized(rows, distribution, parties, recipient, k, suppression, metric,
                                         diverse) -> None:
    qis = ["age", "sex", "zipcode"]
    config = AnonymizationConfig(qis, k=k, suppression=suppression, metric=metric,
                                 l_diversity=LDiversity("distinct", 2, "diagnosis") if diverse else None)
    try:
        central = centralized(ATTRS, rows, HIERARCHIES, config)
    except NoSolutionError:
        central = None
    split = split_horizontal if distribution == "horizontal" else split_vertical
    if len(rows) < parties:
        return
    shares = split(ATTRS, rows, parties)
    local = {f"p{i + 1}": s.local_data(HIERARCHIES) for i, s in enumerate(shares)}
    names = list(local)
    target = names[recipient % parties]
    run = run_in_memory(RunSettings("prop-a", "A", distribution, config, {p: "primary" for p in names}, target, {}),
                        local, timeout_s=60)
    if central is None:
        assert set(run.errors) == set(names) and all(isinstance(e, NoSolutionError) for e in run.errors.values())
        return
    assert not run.errors, run.errors
    out = run.outcomes[target]
    assert differences(central, out.report["transformation"], out.output_columns, out.output_rows) == []
    assert np.isclose(out.report["information_loss"], central.result.information_loss)
