"""Protocol C's check seam without a network: encrypted-count checker + key-holder judge.

The helper side groups a table padded with pseudotuples and sums encrypted counters;
the key holder judges from decrypted, permuted sums. The optimum and the output (fakes
dropped, failing classes suppressed at the key holder) must equal the centralized
engine on the true rows, for every model and counted metric. ElGamal keeps it fast;
one Paillier case checks packing and roll-up of Paillier sums.
"""

from __future__ import annotations


import numpy as np
import pytest

from fedanon.errors import ProtocolError
from fedanon.crypto.counters import generate_counter_key
from fedanon.engine import AnonymizationConfig, EncodedTable, anonymize, read_table_csv
from fedanon.engine.anonymizer import generalize, prepare_structure, search
from fedanon.model.privacy.presence import DeltaPresence
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.data.hierarchy import Hierarchy
from fedanon.protocols.c.counted_checks import (
    CountJudge,
    EncryptedCountChecker,
    RowCounters,
)
from fedanon.protocols.c.pseudotuples import resample_rows

from datasets import DATA_DIR as DATA
QIS = ["sex", "age", "race", "marital-status", "education"]


@pytest.fixture(scope="module")
def adult():
    columns, rows = read_table_csv(DATA / "adult" / "adult.csv")
    pick = np.random.default_rng(11).choice(len(rows), size=600, replace=False)
    rows = [rows[i] for i in sorted(pick.tolist())]
    hier = {a: Hierarchy.read_csv(DATA / "adult" / f"adult_hierarchy_{a}.csv", a) for a in QIS + ["salary-class", "occupation"]}
    return columns, rows, hier


@pytest.fixture(scope="module")
def elgamal_key():
    return generate_counter_key("elgamal")


def _run(columns, rows, hier, cfg, key, subset=None, share=0.25, seed=3):
    rng = np.random.default_rng(seed)
    fakes = resample_rows(rows, int(len(rows) * share), rng=rng)
    padded_rows = rows + fakes
    real = np.r_[np.ones(len(rows), bool), np.zeros(len(fakes), bool)]
    order = rng.permutation(len(padded_rows))
    padded_rows = [padded_rows[i] for i in order]
    real = real[order]
    table = EncodedTable.from_rows(columns, padded_rows)
    pub = key.public_key
    counters = RowCounters(pub.load(pub.encrypt_counters(real.tolist())))
    subset_padded = None
    if subset is not None:
        subset_padded = np.r_[subset, np.zeros(len(fakes), bool)][order]
        counters.subset = pub.load(pub.encrypt_counters((subset_padded & real).tolist()))
    st = prepare_structure(table, hier, cfg, require_subset=False)
    judge_box = {}
    checker = EncryptedCountChecker(st, pub, counters, lambda req: judge_box["j"].answer(req))
    judge_box["j"] = CountJudge(key, cfg, checker.setup_request())
    checker.adopt(judge_box["j"].facts())
    outcome = search(st, checker)
    levels = st.lattice.node_levels(outcome.node)
    out = generalize(st, levels)
    # the key holder: drop fakes, suppress failing classes of the true rows
    keep = real
    qi_idx = [out.column_index(q) for q in cfg.quasi_identifiers]
    sens = {a: out.codes[keep, out.column_index(a)].astype(np.int64) for a in judge_box["j"].sensitive}
    failing, _ = judge_box["j"].failing_rows(out.codes[keep][:, qi_idx], sens,
                                          None if subset_padded is None else subset_padded[keep])
    decoded = [r for r, k in zip(out.decode_rows(), keep) if k]
    for r, f in zip(decoded, failing):
        if f:
            for i in qi_idx:
                r[i] = b"*"
    if subset_padded is not None:
        decoded = [r for r, s in zip(decoded, subset_padded[keep]) if s]
    return {q: int(l) for q, l in zip(cfg.quasi_identifiers, levels)}, outcome.loss, decoded, checker


def _reference(columns, rows, hier, cfg, subset=None):
    table = EncodedTable.from_rows(columns, rows)
    res = anonymize(table, hier, cfg, research_subset=subset)
    out = res.output.decode_rows()
    if subset is not None:
        out = [r for r, s in zip(out, subset) if s]
    return res.transformation, res.information_loss, out


CASES = [
    ("k", AnonymizationConfig(QIS, k=5, metric="discernibility")),
    ("k-supp-loss", AnonymizationConfig(QIS, k=10, suppression=0.05, metric="loss")),
    ("k-aecs", AnonymizationConfig(QIS, k=3, suppression=0.02, metric="aecs")),
    ("recursive-l", AnonymizationConfig(QIS, k=2, suppression=0.04, metric="loss",
                                        l_diversity=LDiversity("recursive", 3, "occupation", c=4))),
    ("t-hier", AnonymizationConfig(QIS, k=1, suppression=0.04, metric="precision",
                                   t_closeness=TCloseness(0.2, "hierarchical", "salary-class"))),
    ("t-equal", AnonymizationConfig(QIS, k=1, metric="height", t_closeness=TCloseness(0.3, "equal", "occupation"))),
    # entropy metrics: per-QI leaf counts at setup; with suppression, per-QI suppressed-row counts per check
    ("nuem", AnonymizationConfig(QIS, k=5, metric="nonuniform-entropy")),
    ("nuem-supp", AnonymizationConfig(QIS, k=5, suppression=0.04, metric="nonuniform-entropy")),
    ("nuem-monotonic-supp", AnonymizationConfig(QIS, k=5, suppression=0.04, metric="nonuniform-entropy-monotonic")),
    ("em-supp", AnonymizationConfig(QIS, k=3, suppression=0.04, metric="entropy")),
    ("nuem-l-supp", AnonymizationConfig(QIS, k=2, suppression=0.04, metric="nonuniform-entropy",
                                        l_diversity=LDiversity("recursive", 3, "occupation", c=4))),
]


@pytest.mark.parametrize("name,cfg", CASES, ids=[c[0] for c in CASES])
def test_encrypted_counts_equal_centralized(adult, elgamal_key, name, cfg):
    columns, rows, hier = adult
    levels, loss, out, checker = _run(columns, rows, hier, cfg, elgamal_key)
    ref_levels, ref_loss, ref_out = _reference(columns, rows, hier, cfg)
    assert levels == ref_levels
    assert loss == pytest.approx(ref_loss, rel=1e-9)
    assert sorted(map(tuple, out)) == sorted(map(tuple, ref_out))
    assert checker.checks > 0
    # one pass over the row counters (the bottom node's sums); every other node rolls encrypted sums up
    assert checker.row_sums == 1
    # the suppression round runs exactly where the metric charges suppression
    charged = cfg.suppression > 0 and cfg.metric in ("entropy", "nonuniform-entropy")
    assert (checker.suppression_rounds > 0) == charged


def test_delta_presence_with_subset_counters(adult, elgamal_key):
    columns, rows, hier = adult
    subset = np.random.default_rng(5).random(len(rows)) < 0.3
    cfg = AnonymizationConfig(QIS, k=2, suppression=0.05, metric="discernibility",
                              delta_presence=DeltaPresence(0.0, 0.6))
    got = _run(columns, rows, hier, cfg, elgamal_key, subset=subset)
    ref = _reference(columns, rows, hier, cfg, subset=subset)
    assert got[0] == ref[0]
    assert sorted(map(tuple, got[2])) == sorted(map(tuple, ref[2]))


@pytest.mark.slow
def test_paillier_counts_roll_up_and_pack(adult, monkeypatch):
    """Also the bottom node's sums in shared memory (pool workers roll up from them, as on
    full ADULT), freed by `close`."""
    from multiprocessing import shared_memory

    from fedanon.crypto import paillier_rows
    from fedanon.protocols.c import class_sums

    monkeypatch.setattr(paillier_rows, "MIN_PARALLEL_ROWS", 16)
    columns, rows, hier = adult
    key = generate_counter_key("paillier")
    cfg = AnonymizationConfig(QIS[:4], k=4, suppression=0.03, metric="loss",
                              l_diversity=LDiversity("distinct", 2, "salary-class"))
    small = rows[:250]
    levels, loss, out, checker = _run(columns, small, hier, cfg, key)
    ref = _reference(columns, small, hier, cfg)
    assert levels == ref[0]
    assert sorted(map(tuple, out)) == sorted(map(tuple, ref[2]))
    assert checker.rollups > 0  # sums were rolled up from finer nodes' encrypted sums
    assert checker.sums._bottom is not None
    blocks = [s._block.name for s, _ in checker.sums._bottom[2].values()
              if isinstance(s, paillier_rows.SharedPaillierRows) and s._block is not None]
    assert blocks  # the roll-ups from the bottom ran over the pool workers
    checker.close()
    checker.close()  # idempotent
    for name in blocks:
        with pytest.raises(FileNotFoundError):
            shared_memory.SharedMemory(name=name)
    # beyond the share limit the bottom sums stay in the helper's process (memory bound)
    monkeypatch.setattr(class_sums, "SHARE_LIMIT", 4)
    levels, loss, out, checker = _run(columns, small, hier, cfg, key)
    assert levels == ref[0] and sorted(map(tuple, out)) == sorted(map(tuple, ref[2]))
    assert not any(isinstance(s, paillier_rows.SharedPaillierRows) for s, _ in checker.sums.bottom()[2].values())
    checker.close()



def _central_checks(columns, rows, hier, cfg) -> int:
    from fedanon.engine.anonymizer import prepare

    prep = prepare(EncodedTable.from_rows(columns, rows), hier, cfg)
    search(prep, prep.checker)
    return prep.checker.checks


@pytest.mark.parametrize("cfg", [AnonymizationConfig(QIS, k=5, suppression=0.04, metric="nonuniform-entropy"),
                                 AnonymizationConfig(QIS, k=3, suppression=0.0, metric="nonuniform-entropy")],
                         ids=["nuem-supp", "nuem"])
def test_entropy_search_screens_and_checks_what_the_centralized_search_checks(adult, elgamal_key, cfg):
    """With the key holder's static loss table the helper's search prunes by bound as the
    engine does: it tests exactly the nodes the centralized search tests (a wrong or missing
    table changes the count); most of them are decided by the one-number screening sum."""
    columns, rows, hier = adult
    levels, _, out, checker = _run(columns, rows, hier, cfg, elgamal_key)
    ref_levels, _, ref_out = _reference(columns, rows, hier, cfg)
    assert levels == ref_levels and sorted(map(tuple, out)) == sorted(map(tuple, ref_out))
    assert checker.checks == _central_checks(columns, rows, hier, cfg)
    assert 0 < checker.screened < checker.checks


def test_no_screening_where_the_bound_needs_class_sizes(adult, elgamal_key):
    columns, rows, hier = adult
    cfg = AnonymizationConfig(QIS, k=5, suppression=0.04, metric="discernibility")
    _, _, _, checker = _run(columns, rows, hier, cfg, elgamal_key)
    assert checker.screened == 0 and checker.static_bounds(np.zeros((1, len(QIS)), dtype=np.int64)) is None


@pytest.mark.slow
def test_paillier_screening_sums_from_shared_bottom(adult, monkeypatch):
    """The screening sum over the bottom node's sums in shared memory (Paillier), both sides
    of the complement, equal to centralized."""
    from fedanon.crypto import paillier_rows

    monkeypatch.setattr(paillier_rows, "MIN_PARALLEL_ROWS", 16)
    columns, rows, hier = adult
    cfg = AnonymizationConfig(QIS[:4], k=4, suppression=0.03, metric="nonuniform-entropy")
    small = rows[:250]
    levels, _, out, checker = _run(columns, small, hier, cfg, generate_counter_key("paillier"))
    ref = _reference(columns, small, hier, cfg)
    assert levels == ref[0] and sorted(map(tuple, out)) == sorted(map(tuple, ref[2]))
    assert checker.screened > 0
    checker.close()


def _pair(columns, rows, hier, cfg, key, omit: bool, seed=3):
    """A checker and its judge over the padded rows; `omit`: whether full checks leave the
    classes below the implied size out (the judge's offer, as the facts carry it)."""
    rng = np.random.default_rng(seed)
    fakes = resample_rows(rows, int(len(rows) * 0.25), rng=rng)
    padded = rows + fakes
    real = np.r_[np.ones(len(rows), bool), np.zeros(len(fakes), bool)]
    order = rng.permutation(len(padded))
    table = EncodedTable.from_rows(columns, [padded[i] for i in order])
    pub = key.public_key
    st = prepare_structure(table, hier, cfg, require_subset=False)
    box = {}
    checker = EncryptedCountChecker(st, pub, RowCounters(pub.load(pub.encrypt_counters(real[order].tolist()))),
                                    lambda req: box["j"].answer(req))
    box["j"] = CountJudge(key, cfg, checker.setup_request())
    facts = box["j"].facts()
    facts.omit_small = facts.omit_small and omit
    checker.adopt(facts)
    return st, checker, box["j"]


@pytest.mark.parametrize("cfg", [AnonymizationConfig(QIS, k=5, suppression=0.04, metric="nonuniform-entropy"),
                                 AnonymizationConfig(QIS, k=2, suppression=0.04, metric="nonuniform-entropy",
                                                     l_diversity=LDiversity("recursive", 3, "occupation", c=4))],
                         ids=["nuem-supp", "nuem-l-supp"])
def test_full_checks_without_the_small_classes_answer_as_with_them(adult, elgamal_key, cfg):
    """Every node answered from its classes of padded size >= the implied size (plus the
    screening sum) gets the answer the same node gets with all its classes sent: anonymity,
    implied-size condition, loss (suppression marginals: the left-out classes' rows added by
    the helper) and bound. A judge that forgot the screening sum's rows, or marginals
    without the left-out classes, would differ on some node."""
    columns, rows, hier = adult
    answers = {}
    for omit in (False, True):
        st, checker, judge = _pair(columns, rows, hier, cfg, elgamal_key, omit)
        assert judge.omit_small and checker.omit_small == omit
        seen = answers.setdefault(omit, {})
        evaluate = checker.evaluate
        checker.evaluate = lambda levels, _e=evaluate, _s=seen: _s.setdefault(tuple(levels), _e(levels))
        search(st, checker)
        assert checker.suppression_rounds > 0
    assert answers[True].keys() == answers[False].keys()
    for node, full in answers[False].items():
        short = answers[True][node]
        assert (short.anonymous, short.anonymous_strict, short.implied_k_ok, short.bound) == \
            (full.anonymous, full.anonymous_strict, full.implied_k_ok, full.bound), node
        assert short.loss == full.loss, node


def test_left_out_classes_missing_from_the_marginals_are_refused(adult, elgamal_key):
    """A helper that answers a suppression query without the rows of the classes it left out
    of the full check gives per-QI counts that do not add up to the suppressed rows: the
    key holder refuses them instead of charging too little loss."""
    columns, rows, hier = adult
    cfg = AnonymizationConfig(QIS, k=5, suppression=0.04, metric="nonuniform-entropy")
    st, checker, _ = _pair(columns, rows, hier, cfg, elgamal_key, True)
    pub = elgamal_key.public_key
    checker._small_sums = lambda classes, sums, small: pub.encrypt_values([0] * small.size, workers=1)
    with pytest.raises(ProtocolError, match="do not add up"):
        search(st, checker)


def test_a_full_check_without_small_classes_needs_a_screening_sum(adult, elgamal_key):
    """The key holder counts the left-out classes' rows from the screening sum of the same
    node: a check marked as leaving them out with no screening before it is refused."""
    columns, rows, hier = adult
    cfg = AnonymizationConfig(QIS, k=5, suppression=0.04, metric="nonuniform-entropy")
    st, checker, judge = _pair(columns, rows, hier, cfg, elgamal_key, True)
    levels = tuple(int(h) - 1 for h in st.lattice.heights)
    classes, sums = checker._node_sums(levels)
    with pytest.raises(ProtocolError, match="screening"):
        judge.answer(checker.full_request(levels, classes, sums))


@pytest.fixture(scope="module")
def paillier_key():
    return generate_counter_key("paillier")


def test_paillier_counters_query_suppression_under_an_elgamal_key(adult, paillier_key):
    """Paillier counters: the key holder's suppression queries (one ciphertext per class) are
    under a fresh ElGamal key of its own, announced in the facts; a node whose full check left
    classes out has the helper send those classes (their sizes add up to the screening sum) so
    that the query covers them too. Every node gets the answer it gets with all classes sent,
    loss included: marginals without the left-out classes, or under the wrong key, would differ."""
    columns, rows, hier = adult
    cfg = AnonymizationConfig(QIS, k=5, suppression=0.04, metric="nonuniform-entropy")
    answers = {}
    for omit in (False, True):
        st, checker, judge = _pair(columns, rows, hier, cfg, paillier_key, omit)
        assert judge.query_key is not judge.key and judge.query_key.scheme == "elgamal"
        assert checker.query_key.to_bytes() == judge.query_key.public_key.to_bytes()
        seen = answers.setdefault(omit, {})
        evaluate = checker.evaluate
        checker.evaluate = lambda levels, _e=evaluate, _s=seen: _s.setdefault(tuple(levels), _e(levels))
        asked = []
        omitted_request = checker.omitted_request
        checker.omitted_request = lambda _o=omitted_request, _a=asked: _a.append(1) or _o()
        search(st, checker)
        checker.close()
        assert checker.suppression_rounds > 0
        assert bool(asked) == omit  # the left-out classes are asked for only where some were left out
    assert answers[True].keys() == answers[False].keys()
    for node, full in answers[False].items():
        short = answers[True][node]
        assert (short.anonymous, short.anonymous_strict, short.implied_k_ok, short.bound, short.loss) == \
            (full.anonymous, full.anonymous_strict, full.implied_k_ok, full.bound, full.loss), node
    ref = _reference(columns, rows, hier, cfg)
    levels, loss, out, checker = _run(columns, rows, hier, cfg, paillier_key)
    checker.close()
    assert levels == ref[0] and loss == pytest.approx(ref[1], rel=1e-9)
    assert sorted(map(tuple, out)) == sorted(map(tuple, ref[2]))


def test_left_out_classes_that_miss_the_screening_rows_are_refused(adult, paillier_key):
    """The left-out classes the helper sends for an ElGamal query must hold the rows the screening
    sum told: a helper that sends other sums is refused instead of charging too little loss."""
    columns, rows, hier = adult
    cfg = AnonymizationConfig(QIS, k=5, suppression=0.04, metric="nonuniform-entropy")
    st, checker, _ = _pair(columns, rows, hier, cfg, paillier_key, True)
    pub = paillier_key.public_key
    checker._small_sums = lambda classes, sums, small: pub.encrypt_values([0] * small.size, workers=1)
    with pytest.raises(ProtocolError, match="screening sum's rows"):
        search(st, checker)
    checker.close()


@pytest.mark.parametrize("cfg", [AnonymizationConfig(QIS, k=5, metric="nonuniform-entropy"),
                                 AnonymizationConfig(QIS, k=2, metric="nonuniform-entropy",
                                                     l_diversity=LDiversity("recursive", 3, "occupation", c=4))],
                         ids=["sizes", "histograms"])
def test_leaf_marginals_from_the_bottom_are_the_row_counters_sums(adult, elgamal_key, cfg):
    """The setup's per-QI leaf marginals and totals, rolled up from the bottom node's sums, must
    be the very ciphertexts summing the row counters per leaf gives (and decrypt to the true
    rows per leaf): a wrong column, leaf order or empty leaf would change the entropy metric."""
    columns, rows, hier = adult
    rng = np.random.default_rng(5)
    fakes = resample_rows(rows, len(rows) // 4, rng=rng)
    real = np.r_[np.ones(len(rows), bool), np.zeros(len(fakes), bool)]
    table = EncodedTable.from_rows(columns, rows + fakes)
    pub = elgamal_key.public_key
    counters = RowCounters(pub.load(pub.encrypt_counters(real.tolist())))
    structure = prepare_structure(table, hier, cfg, require_subset=False)
    checker = EncryptedCountChecker(structure, pub, counters, lambda request: b"")
    leaves = [int(cm.shape[1]) for cm in structure.code_maps]
    marginals = checker.sums.leaf_marginals(leaves)
    for i, d0 in enumerate(leaves):
        col = np.asarray(structure.grouper.qi_column(i), dtype=np.int64)
        bounds = np.bincount(col, minlength=d0).tolist()
        expected = pub.sums_message(pub.sum_by_class(counters.real, col.tolist(), d0), bounds)
        assert pub.sums_message(marginals[i], bounds) == expected
        counts = elgamal_key.decrypt_class_counts(expected, d0)
        assert counts == np.bincount(col[real], minlength=d0).tolist()
    totals = checker.sums.bottom_total()
    direct = checker.sums.from_rows(np.zeros(table.n_rows, dtype=np.int64), 1)
    assert set(totals) == set(direct)
    for name, (sums, bounds) in totals.items():
        assert pub.sums_message(sums, bounds.tolist()) == pub.sums_message(direct[name][0], direct[name][1].tolist())
    checker.close()
