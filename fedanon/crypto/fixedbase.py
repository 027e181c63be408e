"""Fixed-base exponentiation h^e mod m by the Lim-Lee comb, for Paillier's DJN randomizers.

Protocol C encrypts one counter per row: each costs one h_s^e mod n² with a fresh uniform
e (320 bits, `paillier.RANDOMIZER_BITS`; DJN's own length is 1536 at a 3072-bit key), the
one cost that grows with the table. The comparison below is at 1536 bits. The base never changes
within a run, so a precomputed table trades memory for multiplications. Two ways, same
table size T, b-bit exponents:

* windows (what fedanon used before): T = (b/w)·2^w entries h^(d·2^(w·i)); b/w
  multiplications per exponentiation. w = 10: 154 multiplications, T = 157,000 (120 MB
  at 3072 bits, 1.6 s to build);
* the comb (Lim & Lee, CRYPTO '94): the exponent's bits as an r × a matrix (a = ⌈b/r⌉),
  entries G[k][u] = Π_{i ∈ u} h^(2^(i·a + k·c)) for every r-bit pattern u and each of v
  column blocks of c = ⌈a/v⌉ columns; one multiplication per column (r exponent bits at
  once) and one squaring per column of a block: a multiplications + c − 1 squarings,
  T = v·2^r. r = 13, v = 8: 119 multiplications + 14 squarings, T = 65,536 (50 MB, 0.7 s).

Measured at 3072 bits for a pool worker's ~6,300 ADULT counters, table included
(`python3 bench/fixedbase.py`, one core): comb 9.7 CPU-s, windows w = 10 12.4, w = 8 13.6,
plain powmod 105: the comb takes 0.78 of the windows' time.

Exponents come as bytes (`random_exponents`, os.urandom) and are cut into column patterns
with numpy for a whole chunk at once, so Python touches each exponent once per column, not
per bit. The result is h^e for exactly the uniform e of `exp_bits` bits that the bytes
spell: the same distribution as any other way of computing it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from gmpy2 import mpz

#: Largest table (entries) a batch may choose: 65,536 ciphertext-size numbers, ≈ 50 MB at a
#: 3072-bit modulus (mod n², 768 bytes each; a CRT pair ≈ 2 × 25 MB).
MAX_ENTRIES = 1 << 16
#: A squaring mod m costs about this share of a multiplication (gmpy2, 6144-bit m: 8.8 / 10.4 µs).
SQUARING_COST = 0.85


@dataclass(frozen=True)
class CombShape:
    """r rows (bits per table lookup) and v column blocks of the comb for `exp_bits`-bit exponents."""

    exp_bits: int
    rows: int
    blocks: int

    @property
    def columns(self) -> int:  # a
        return -(-self.exp_bits // self.rows)

    @property
    def block_columns(self) -> int:  # c
        return -(-self.columns // self.blocks)

    @property
    def used_blocks(self) -> int:
        return -(-self.columns // self.block_columns)

    @property
    def entries(self) -> int:
        return self.used_blocks * (1 << self.rows)

    def cost(self, count: int) -> float:
        """Multiplications (squarings weighted) for `count` exponentiations plus building the table."""
        per_power = self.columns + SQUARING_COST * (self.block_columns - 1)
        build = self.used_blocks * ((1 << self.rows) - 1 - self.rows) + SQUARING_COST * self.exp_bits
        return max(count, 1) * per_power + build


def shape_for(count: int, exp_bits: int) -> CombShape:
    """The comb that makes `count` exponentiations cheapest, table building included, within
    `MAX_ENTRIES`. Why per batch: a few encryptions want a small table that is quick to build,
    a pool worker's thousands the largest."""
    shapes = [CombShape(exp_bits, r, v) for r in range(1, 17) for v in range(1, 33)
              if CombShape(exp_bits, r, v).entries <= MAX_ENTRIES and v <= CombShape(exp_bits, r, 1).columns]
    return min(shapes, key=lambda s: (s.cost(count), s.entries))


#: The shape of single exponentiations (`Comb.pow`, one encryption at a time): ~0.8 MB at 3072
#: bits, built in ~15 ms; 192 multiplications + 47 squarings per power.
DEFAULT_SHAPE_ROWS, DEFAULT_SHAPE_BLOCKS = 8, 4


def random_exponents(count: int, exp_bits: int) -> np.ndarray:
    """`count` uniform exponents of `exp_bits` bits, one big-endian row of bytes each."""
    nbytes = (exp_bits + 7) // 8
    raw = np.frombuffer(os.urandom(count * nbytes), dtype=np.uint8).reshape(count, nbytes).copy()
    if exp_bits % 8:
        raw[:, 0] &= (1 << (exp_bits % 8)) - 1
    return raw


def column_patterns(raw: np.ndarray, shape: CombShape) -> np.ndarray:
    """(count, a) array: for each exponent (big-endian bytes) and column j, the r-bit pattern
    Σ_i bit(i·a + j) << i. Bits at or above `exp_bits` must be 0 (they are dropped)."""
    count = raw.shape[0]
    bits = np.unpackbits(raw, axis=1)[:, ::-1][:, : shape.exp_bits]  # bits[:, p] = bit p of e
    padded = np.zeros((count, shape.rows * shape.columns), dtype=np.uint32)
    padded[:, : bits.shape[1]] = bits
    weights = (np.uint32(1) << np.arange(shape.rows, dtype=np.uint32))[None, :, None]
    return (padded.reshape(count, shape.rows, shape.columns) * weights).sum(axis=1, dtype=np.uint32)


def random_patterns(count: int, shape: CombShape) -> list[list[int]]:
    """Column patterns of `count` fresh uniform exponents of `shape.exp_bits` bits."""
    return column_patterns(random_exponents(count, shape.exp_bits), shape).tolist()


class Comb:
    """The comb table of one base modulo one modulus; `pow_patterns` is the hot loop."""

    __slots__ = ("shape", "mod", "tables", "steps")

    def __init__(self, base: mpz, mod: mpz, shape: CombShape) -> None:
        self.shape, self.mod = shape, mod
        r, a, c = shape.rows, shape.columns, shape.block_columns
        # h^(2^p) for every position p = i·a + k·c a table entry combines, by one squaring chain
        wanted = sorted({i * a + k * c for i in range(r) for k in range(shape.used_blocks)})
        powers: dict[int, mpz] = {}
        x, at = mpz(base) % mod, 0
        for p in wanted:
            for _ in range(p - at):
                x = x * x % mod
            at = p
            powers[p] = x
        self.tables: list[list[mpz]] = []
        for k in range(shape.used_blocks):
            bases = [powers[i * a + k * c] for i in range(r)]
            table = [mpz(1)] * (1 << r)
            for u in range(1, 1 << r):
                low = u & -u
                rest = u ^ low
                g = bases[low.bit_length() - 1]
                table[u] = g if not rest else table[rest] * g % mod
            self.tables.append(table)
        # per squaring step (column j of every block, from the top): (block table, column index)
        self.steps = [[(self.tables[k], k * c + j) for k in range(shape.used_blocks) if k * c + j < a]
                      for j in range(c - 1, -1, -1)]

    def pow_patterns(self, patterns: Sequence[int]) -> mpz:
        """h^e for the exponent whose column patterns (`column_patterns`) are given."""
        acc, mod = None, self.mod
        for step in self.steps:
            if acc is not None:
                acc = acc * acc % mod
            for table, j in step:
                u = patterns[j]
                if u:
                    acc = table[u] if acc is None else acc * table[u] % mod
        return mpz(1) if acc is None else acc

    def pow(self, e: int) -> mpz:
        """h^e for one exponent 0 <= e < 2^exp_bits (tests, single encryptions)."""
        if not 0 <= e < 1 << self.shape.exp_bits:
            raise ValueError(f"exponent must be in [0, 2^{self.shape.exp_bits})")
        raw = np.frombuffer(int(e).to_bytes((self.shape.exp_bits + 7) // 8, "big"), dtype=np.uint8)[None, :]
        return self.pow_patterns(column_patterns(raw, self.shape)[0].tolist())
