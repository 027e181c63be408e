"""Property: for random tables, splits, models and pseudotuple shares, Protocol C equals the
centralized engine (transformation and row multiset; the pseudotuples are gone).

Rows are drawn from the example's value domains (so the bundled hierarchies apply);
ElGamal counters over the in-memory transport keep each case well under a second.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedanon.model.config import AnonymizationConfig

from fedanon.model.privacy.presence import DeltaPresence

from fedanon.model.privacy.ldiversity import LDiversity

from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.engine.result import NoSolutionError
from fedanon.protocols.kit.api import RunSettings
from fedanon.protocols.c.counted_checks import COUNTED_METRICS
from fedanon.protocols.sim.equivalence import centralized, differences
from fedanon.protocols.sim.local_run import run_in_memory
from fedanon.protocols.sim.split import split_horizontal, split_vertical
from protocol_cases import EX_ATTRS, EX_QIS, example_hierarchies, example_row_strategy

ATTRS = EX_ATTRS
QIS = EX_QIS
HIERARCHIES = example_hierarchies()
row_strategy = example_row_strategy(HIERARCHIES)
MODELS = {
    "k": lambda k: {},
    "recursive-l": lambda k: {"l_diversity": LDiversity("recursive", 2, "diagnosis", c=3)},
    "t": lambda k: {"t_closeness": TCloseness(0.4, "hierarchical", "diagnosis")},
    "delta": lambda k: {"delta_presence": DeltaPresence(0.0, 0.7)},
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(row_strategy, min_size=4, max_size=30), distribution=st.sampled_from(["horizontal", "vertical"]),
       parties=st.integers(2, 3), k=st.integers(1, 4), suppression=st.sampled_from([0.0, 0.1, 0.3]),
       metric=st.sampled_from(COUNTED_METRICS), model=st.sampled_from(list(MODELS)),
       share=st.sampled_from([0.1, 0.25, 1.0]), seed=st.integers(0, 2**16))
def test_random_tables_equal_centralized(rows, distribution, parties, k, suppression, metric, model, share, seed):
    config = AnonymizationConfig(QIS, k=k, suppression=suppression, metric=metric, **MODELS[model](k))
    subset = np.random.default_rng(seed).random(len(rows)) < 0.5 if model == "delta" else None
    if subset is not None and not subset.any():
        subset[0] = True
    try:
        central = centralized(ATTRS, rows, HIERARCHIES, config, subset)
    except NoSolutionError:
        central = None
    if distribution == "horizontal" and len(rows) < parties:
        return
    split = split_horizontal if distribution == "horizontal" else split_vertical
    shares = split(ATTRS, rows, parties, research_subset=subset)
    local = {f"p{i + 1}": s.local_data(HIERARCHIES) for i, s in enumerate(shares)}
    roles = {**{p: "primary" for p in local}, "helper": "helper"}
    settings_ = RunSettings("prop-c", "C", distribution, config, roles, "p1",
                            {"counters": "elgamal", "pseudotuples": share})
    run = run_in_memory(settings_, local, timeout_s=120)
    if central is None:
        assert set(run.errors) == set(roles) and all(isinstance(e, NoSolutionError) for e in run.errors.values())
        return
    assert not run.errors, run.errors
    out = run.outcomes["p1"]
    assert differences(central, out.report["transformation"], out.output_columns, out.output_rows) == []
    assert np.isclose(out.report["information_loss"], central.result.information_loss, rtol=1e-9)
