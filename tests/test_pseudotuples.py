"""The pseudotuple strategy: values from the party's own data, marginals kept, one column changed."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from fedanon.errors import ProtocolError
from fedanon.protocols.c.pseudotuples import fake_tid, pseudotuple_count, pseudotuple_share, resample_rows


def _rows(n: int = 2000) -> list[list[str]]:
    rng = np.random.default_rng(0)
    return [[f"a{rng.zipf(2) % 7}", f"b{rng.integers(3)}", f"t{i}"] for i in range(n)]


def test_fakes_use_only_real_values_and_keep_marginals():
    rows = _rows()
    fakes = resample_rows(rows, 4000, fixed={2}, rng=np.random.default_rng(1))
    assert len(fakes) == 4000
    for c in (0, 1):
        real = Counter(r[c] for r in rows)
        fake = Counter(r[c] for r in fakes)
        assert set(fake) <= set(real)
        for value, count in real.items():  # same share per value, up to sampling noise
            assert abs(fake[value] / 4000 - count / 2000) < 0.03
    # the fixed column is copied from the starting row, so it names that row: every fake
    # differs from it in at most one mixed column (a donor may carry the same value by
    # chance), so the fakes keep the correlations between columns; both columns get swapped
    base = {r[2]: r for r in rows}
    differing = [[c for c in (0, 1) if f[c] != base[f[2]][c]] for f in fakes]
    assert max(len(d) for d in differing) == 1
    assert sum(len(d) == 1 for d in differing) > 0.4 * len(fakes)
    assert {d[0] for d in differing if d} == {0, 1}


def test_share_option_is_validated():
    assert pseudotuple_share({}) == 0.25
    assert pseudotuple_share({"pseudotuples": "0.5"}) == 0.5
    assert pseudotuple_count(30162, 0.25) == 7540
    for bad in (-0.1, 11, "many"):
        with pytest.raises(ProtocolError, match="pseudotuples"):
            pseudotuple_share({"pseudotuples": bad})


def test_vertical_fake_tids_agree_across_parties_and_depend_on_the_key():
    assert fake_tid(b"k" * 32, 3) == fake_tid(b"k" * 32, 3)
    assert fake_tid(b"k" * 32, 3) != fake_tid(b"k" * 32, 4) != fake_tid(b"j" * 32, 4)
