"""Flash == exhaustive search for ℓ-diversity, t-closeness and δ-presence (hypothesis).

Random small tables and random monotone hierarchies (E1's strategies), every
privacy model beyond k-anonymity, with and without suppression, several
metrics (monotone and not). Every Flash output is also re-checked by the
independent verifier.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine_strategies import hierarchies
from fedanon.engine import AnonymizationConfig, NoSolutionError, anonymize
from fedanon.model.metrics.registry import METRICS
from fedanon.model.privacy.presence import DeltaPresence
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.oracle.exhaustive import exhaustive_optimum
from fedanon.data.table import EncodedTable
from fedanon.oracle.verify import verify_anonymized

MODELS = ["k-anonymity", "distinct", "entropy", "recursive", "t-equal", "t-hierarchical", "delta", "conjunction"]
METRICS_SAMPLE = list(METRICS)  # all nine, monotone and not


@st.composite
def model_instances(draw, model: str):
    q = draw(st.integers(1, 3))
    names = [f"q{i}" for i in range(q)]
    hier = {n: draw(hierarchies(n, max_values=5, max_height=3)) for n in names}
    sens = draw(hierarchies("s", max_values=5, max_height=3).filter(lambda h: len(h.rows) >= 3))
    hier["s"] = sens
    n_rows = draw(st.integers(2, 30))
    leaves = {n: [r[0].decode() for r in hier[n].rows] for n in names + ["s"]}
    rows = [[draw(st.sampled_from(leaves[n])) for n in names + ["s"]] for _ in range(n_rows)]
    table = EncodedTable.from_rows(names + ["s"], rows)
    k = draw(st.sampled_from([1, 1, 2, 3]))
    suppression = draw(st.sampled_from([0.0, 0.15, 0.35, 0.6]))
    metric = draw(st.sampled_from(METRICS_SAMPLE))
    subset = None
    ldiv = tclose = delta = None
    if model == "k-anonymity":  # the verifier re-checks plain k-anonymity outputs too
        k = draw(st.integers(2, 4))
    elif model in ("distinct", "entropy"):
        ldiv = LDiversity(model, draw(st.sampled_from([1.3, 1.8, 2.0] if model == "entropy" else [2.0, 2.0, 3.0])), "s")
    elif model == "recursive":
        ldiv = LDiversity("recursive", float(draw(st.sampled_from([2, 2, 3]))), "s",
                          draw(st.sampled_from([1.0, 2.0, 3.0, 4.0])))
    elif model.startswith("t-"):
        tclose = TCloseness(draw(st.sampled_from([0.15, 0.3, 0.5])), model[2:], "s")
    elif model == "conjunction":  # k + ℓ + t + δ at once
        ldiv = LDiversity("distinct", 2.0, "s")
        tclose = TCloseness(draw(st.sampled_from([0.3, 0.5, 0.7])), draw(st.sampled_from(["equal", "hierarchical"])), "s")
        delta = DeltaPresence(0.0, draw(st.sampled_from([0.6, 0.8, 1.0])))
        subset = np.array(draw(st.lists(st.booleans(), min_size=n_rows, max_size=n_rows)), dtype=bool)
        subset[0] = True
    else:
        dmin = draw(st.sampled_from([0.0, 0.0, 0.2]))
        delta = DeltaPresence(dmin, draw(st.sampled_from([0.5, 0.7, 1.0])))
        subset = np.array(draw(st.lists(st.booleans(), min_size=n_rows, max_size=n_rows)), dtype=bool)
        if not subset.any():
            subset[0] = True
    cfg = AnonymizationConfig(names, k=k, l_diversity=ldiv, t_closeness=tclose, delta_presence=delta,
                              suppression=suppression, metric=metric)
    return table, hier, cfg, subset, rows


@pytest.mark.parametrize("model", MODELS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_flash_equals_exhaustive_for_models(model, data):
    table, hier, cfg, subset, rows = data.draw(model_instances(model))
    expected, expected_loss = exhaustive_optimum(table, hier, cfg, subset)
    event("no solution" if expected is None else "solved")
    if expected is None:
        with pytest.raises(NoSolutionError):
            anonymize(table, hier, cfg, research_subset=subset)
        return
    res = anonymize(table, hier, cfg, research_subset=subset)
    assert math.isclose(res.information_loss, expected_loss, rel_tol=1e-9, abs_tol=1e-9), \
        (cfg, res.transformation, expected)
    assert res.transformation == expected  # ties broken by the same stable order
    event(f"suppressed rows: {'yes' if res.suppressed_rows else 'no'}")
    out = [[v.decode() for v in r] for r in res.output.decode_rows()]
    problems = verify_anonymized(table.columns, rows, table.columns, out, cfg, hier,
                                 research_subset=subset, transformation=res.transformation,
                                 suppressed=list(res.suppressed),
                                 reported_suppressed_rows=res.suppressed_rows, reported_classes=res.classes)
    assert problems == [], (cfg, res.transformation, problems)


def _opaque(value: bytes, salt: bytes) -> bytes:
    import hashlib

    return hashlib.sha256(salt + value).digest()  # stands in for a deterministic cipher


@pytest.mark.parametrize("model", ["recursive", "t-hierarchical", "delta", "conjunction"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_models_give_the_same_result_on_opaque_values(model, data):
    """Same optimum when every value (table and hierarchies) is replaced by an opaque byte string
    and rows are shuffled -- what running on ciphertext means for the models."""
    from fedanon.data.hierarchy import Hierarchy

    table, hier, cfg, subset, rows = data.draw(model_instances(model))
    try:
        plain = anonymize(table, hier, cfg, research_subset=subset)
    except NoSolutionError:
        plain = None
    order = data.draw(st.permutations(range(len(rows))))
    salts = {c: bytes([i]) for i, c in enumerate(table.columns)}
    enc_rows = [[_opaque(v.encode(), salts[c]) for c, v in zip(table.columns, rows[i])] for i in order]
    enc_hier = {a: Hierarchy.from_rows(a, [[_opaque(v, salts[a]) if j == 0 else _opaque(v, salts[a] + bytes([j]))
                                            for j, v in enumerate(r)] for r in h.rows])
                for a, h in hier.items()}
    enc_subset = None if subset is None else subset[list(order)]
    enc_table = EncodedTable.from_rows(table.columns, enc_rows)
    if plain is None:
        with pytest.raises(NoSolutionError):
            anonymize(enc_table, enc_hier, cfg, research_subset=enc_subset)
        return
    enc = anonymize(enc_table, enc_hier, cfg, research_subset=enc_subset)
    assert enc.transformation == plain.transformation
    assert math.isclose(enc.information_loss, plain.information_loss, rel_tol=1e-9, abs_tol=1e-9)
    assert enc.suppressed_rows == plain.suppressed_rows and enc.classes == plain.classes
    assert np.asarray(plain.suppressed)[list(order)].tolist() == np.asarray(enc.suppressed).tolist()
