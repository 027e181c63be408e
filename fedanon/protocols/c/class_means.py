"""Protocol C's class means: aggregated columns summed per class under the counter key.

A column aggregated by `mean` (run option `aggregate_means`, horizontal split) never enters
the deterministically encrypted table: every primary sends, per row of its padded share,
Enc(value) under the key holder's additively homomorphic counter key (Paillier), and 0 for a
pseudotuple. After the search the helper groups the padded rows by their generalized
quasi-identifiers, multiplies each class's ciphertexts into Enc(class sum) and sends those,
in a random class order, with each result row's class number. The key holder decrypts the
class sums (and, as before, the row counters, whose per-class totals are the class counts)
and releases each kept row's class mean; a suppressed row releases '*'. No party sees
another's value: the helper sees ciphertexts only, the key holder sums of whole classes.

Fixed-point encoding: a value v is sent as the integer V = v x 10^FIXED_DECIMALS (a value with
more decimals is refused), shifted by OFFSET = 2^VALUE_BITS so that negative values encode as
non-negative integers: E = V + OFFSET in [0, 2^(VALUE_BITS+1)) for |V| < 2^VALUE_BITS. A class
of c real rows (and any pseudotuples, which add 0) sums to S + c x OFFSET; the key holder, who
knows c, subtracts it. Bounds: |v| < 2^VALUE_BITS / 10^FIXED_DECIMALS (about 1.1 x 10^8), and
a class of at most 2^(SLOT_BITS - VALUE_BITS - 1) padded rows (about 8.4 million), so every
class sum fits the 64-bit slots the key holder's packed decryption takes; a class sum can
never wrap around the Paillier modulus (3072 bits).

The mean is S / (c x 10^FIXED_DECIMALS) rounded to 2 decimals half to even, written as
`microagg.classwise` writes it: exactly the local release's text.

What the key holder learns beyond the release: the sums of the classes it suppresses (it
decrypts the sums of every class of the chosen node; a suppressed class of one real row
thus shows that row's value -- as the key holder also decrypts the suppressed rows' other
non-QI cells). The helper learns nothing new: ciphertexts, and the class structure of the
padded table it computes itself.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any, Sequence

import numpy as np

from fedanon.errors import ProtocolError
from fedanon.protocols.kit.api import ClassMeansRoute
from fedanon.microagg.classwise import MEAN_DECIMALS, SUPPRESSED, decimal_text, round_half_even

OPTION = "aggregate_means"
FIXED_DECIMALS = 4
VALUE_BITS = 40
SLOT_BITS = 64
OFFSET = 1 << VALUE_BITS
MAX_CLASS_ROWS = 1 << (SLOT_BITS - VALUE_BITS - 1)


def mean_columns(options: dict[str, Any]) -> list[str]:
    """The columns the run option names (a list of column names), checked."""
    names = options.get(OPTION) or []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ProtocolError(f"option {OPTION} must be a list of column names")
    return list(names)


def encodable(text: str) -> bool:
    """Whether a value fits the fixed-point encoding (FIXED_DECIMALS decimals, below the bound)."""
    try:
        scaled = Decimal(text.strip()) * Decimal(10) ** FIXED_DECIMALS
    except InvalidOperation:
        return False
    return scaled.is_finite() and scaled == scaled.to_integral_value() and abs(scaled) < OFFSET


#: the route the registry declares for Protocol C (horizontal splits only: in a vertical split the
#: mean column's holder is not the party whose rows carry the counters)
ROUTE = ClassMeansRoute(OPTION, ("horizontal",), encodable,
                        f"Protocol C's class means take at most {FIXED_DECIMALS} decimals and magnitudes below "
                        f"{OFFSET / 10 ** FIXED_DECIMALS:.3g}")


def encode_values(texts: Sequence[str], real: np.ndarray, column: str) -> list[int]:
    """The plaintexts a primary encrypts for one column: E = V + OFFSET per real row, 0 per pseudotuple."""
    scale = Decimal(10) ** FIXED_DECIMALS
    out: list[int] = []
    for line, (text, is_real) in enumerate(zip(texts, real.tolist()), start=1):
        if not is_real:
            out.append(0)
            continue
        if not encodable(text):
            raise ProtocolError(f"row {line} of column {column!r}: a class mean in Protocol C takes values with at "
                                f"most {FIXED_DECIMALS} decimals and below {OFFSET / 10 ** FIXED_DECIMALS:.3g} in "
                                "magnitude")
        out.append(int(Decimal(text.strip()) * scale) + OFFSET)
    return out


def class_bounds(padded_sizes: np.ndarray) -> list[int]:
    """Per class the largest possible encoded sum (public: from the padded class sizes)."""
    if padded_sizes.size and int(padded_sizes.max()) > MAX_CLASS_ROWS:
        raise ProtocolError(f"a class of {int(padded_sizes.max())} rows exceeds the {MAX_CLASS_ROWS} rows a "
                            "Protocol C class sum can hold")
    return [int(s) << (VALUE_BITS + 1) for s in padded_sizes.tolist()]


def class_means(sums: Sequence[int], classes: np.ndarray, released: np.ndarray) -> list[str]:
    """Key holder: the released text of each real result row, from the decrypted class sums.

    `classes`: each real row's class number (pseudotuples dropped; the class counts are
    counted from it); `released`: whether the row is released with values (not suppressed).
    """
    counts = np.bincount(classes, minlength=len(sums)) if classes.size else np.zeros(len(sums), np.int64)
    texts: dict[int, str] = {}
    for c in np.unique(classes[released]).tolist():
        count = int(counts[c])
        total = int(sums[c]) - count * OFFSET
        if count == 0 or abs(total) >= count * OFFSET:
            raise ProtocolError(f"a decrypted class sum does not fit its {count} row(s)")
        hundredths = round_half_even(total * 10 ** MEAN_DECIMALS, count * 10 ** FIXED_DECIMALS)
        texts[c] = decimal_text(hundredths, MEAN_DECIMALS)
    return [texts[int(c)] if keep else SUPPRESSED for c, keep in zip(classes.tolist(), released.tolist())]
