"""Pseudotuples for Protocol C: fake rows that hide the true class sizes from the helper.

Strategy ("resample", the only one): a fake row starts as a copy of a random real row
of this party; then exactly one of its columns, chosen at random, takes the value of that
column in another, independently drawn real row of this party. Why this one:

* every value a fake row carries is a value this party really has, so the party's
  hierarchies already cover it -- no new hierarchy rules, nothing new to encrypt, and a
  value never betrays a pseudotuple by being unusual;
* each column's value distribution over the fakes equals the party's real one, so
  per-value frequencies give the helper no handle on which rows are fake;
* the *joint* distribution -- which the helper turns into class sizes at every node --
  is masked: fakes fall into existing classes (inflating them by unknown amounts) and
  into new combinations (classes that hold no real row at all);
* a fake differs from a real row in one column only, so it keeps almost all of the
  correlations between columns.  An earlier version replaced every column with
  probability 1/2; that broke the correlations, and a nearest-neighbour classifier
  trained with the labels told its fakes from real rows about 4 points above chance in
  protocol runs on a 400-row ADULT sample and 7.5--11 points on 1,200 rows (one column:
  within 1.5 points of chance; uniformly drawn fakes: 38 points). The estimator and its
  bound are `tests/test_protocol_c.py`'s leakage tests; README, "Pseudotuple strategy".

What it does not do: it does not change the marginal distribution the helper sees
(the mixture of real and fake rows has the real marginals in expectation). A value
distribution is what Protocol B's helper learns too; C's gain is that the helper no
longer learns the *sizes* of the classes the search forms. The share of fakes is
configurable (option `pseudotuples`, a fraction of the party's real rows, default 0.25,
the dissertation's value): more fakes mask more, cost proportionally more counter
encryption, bytes and grouping time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

import numpy as np

from fedanon.errors import ProtocolError

DEFAULT_SHARE = 0.25
MAX_SHARE = 10.0


def pseudotuple_share(options: dict) -> float:
    """The configured share (fraction of real rows), validated."""
    value = options.get("pseudotuples", DEFAULT_SHARE)
    try:
        share = float(value)
    except (TypeError, ValueError):
        raise ProtocolError(f"option pseudotuples must be a number (share of real rows), got {value!r}") from None
    if not 0.0 <= share <= MAX_SHARE:
        raise ProtocolError(f"option pseudotuples must be between 0 and {MAX_SHARE:g}, got {share:g}")
    return share


def pseudotuple_count(real_rows: int, share: float) -> int:
    return int(round(real_rows * share))


def resample_rows(rows: list[list[str]], count: int, fixed: set[int] | None = None,
                  rng: np.random.Generator | None = None) -> list[list[str]]:
    """`count` fake rows built from `rows` as the module docstring says.

    `fixed` column indexes are left out of the mixing and filled by the caller
    (the TID column in a vertical split).
    """
    if count <= 0:
        return []
    if not rows:
        raise ProtocolError("cannot make pseudotuples for a party without rows")
    rng = rng or np.random.default_rng(secrets.randbits(128))
    width = len(rows[0])
    mixable = [c for c in range(width) if c not in (fixed or set())]
    base = rng.integers(0, len(rows), count)
    donors = rng.integers(0, len(rows), count)
    swapped = rng.choice(mixable, size=count) if mixable else None
    out = []
    for i in range(count):
        row = list(rows[int(base[i])])
        if swapped is not None:
            column = int(swapped[i])
            row[column] = rows[int(donors[i])][column]
        out.append(row)
    return out


def fake_tid(tid_key: bytes, i: int) -> str:
    """TID of the i-th vertical pseudotuple: every primary derives the same one from the
    shared TID key (so the fake rows join), the helper sees only its join token, like any
    other TID's; 128 bits of HMAC output make a collision with a real TID negligible."""
    return "pseudotuple-" + hmac.new(tid_key, b"fedanon/C/pseudotuple/%d" % i, hashlib.sha256).hexdigest()[:32]
