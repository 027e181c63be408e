"""Independent reference anonymizer: plain Python, straight from the definitions.

Why it exists: `engine/exhaustive.py` reuses the engine's own preparation, grouping,
model checks, loss functions and tie-break, so comparing Flash with it only proves
that the pruning is sound. This module shares NO code with `fedanon.engine` (it
imports nothing from fedanon; files are read with the stdlib `csv` module). It
works on the rows themselves: every cell is generalized through a dict built from
the hierarchy rows, classes are dicts of row indices, each privacy model is judged
from its textbook definition (dissertation §2.4), every metric is computed cell by
cell from its formula (§2.6 and the suppression-aware variant of §3.6.2), the whole
lattice is enumerated, and the optimum is chosen by the documented tie-break
(docs/guide/anonymize.md, "What optimal means": lowest loss, then lower total level, then the lexicographically
smaller level vector). It is deliberately slow: use it on small tables only.

Where the engine's documented definitions differ from the dissertation's formulas
the reference implements the engine's documented definition (the one under test)
and offers the dissertation's literal form next to it, with the relation checked
in `tests/test_reference.py`:

* precision / precision-star: the dissertation defines PM and PM* as *precision*
  (1 = unchanged, higher is better, eqs. 2.20/2.21); the engine minimizes, so it
  reports 1 − PM and 1 − PM*. Same optimum. `precision_dissertation`.
* AECS: eq. 2.24 divides by the class size the model implies (p = k or ℓ); the
  engine reports the unnormalized n / #classes. p is constant during a run, so
  the optimum is the same and the dissertation value is engine / p.
  `aecs_dissertation`. Suppressed rows count as one class (they are one class of
  the output table: every QI cell is ``*``), which makes AECS non-monotone with
  suppression as §3.7 (Flash_2P example) assumes.
* DM*: eq. 2.26 writes the sum over *non-suppressed* classes, while Abbildung 2.15
  lists DM* as monotone and ignoring suppression, and the FLASH implementation of
  the dissertation's authors (`org.deidentifier.flash.metric.MetricDMStar`) sums
  |E|² over *all* classes. The engine follows table 2.15 and the implementation;
  the formula's "E ∉ O" contradicts the stated properties (summing only kept
  classes rewards suppression), so the engine's reading is the right one.
  `discernibility_star_dissertation_literal` gives the formula as printed.
* entropy (EM) with suppression: §3.6.2 defines the suppression term only for
  non-uniform entropy (eq. 3.5, −Σ log2 Y). The engine adds the analogous
  −Σ Y·log2 Y to EM; the reference does the same (documented extension).
"""

from __future__ import annotations

import csv
import itertools
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

SUPPRESSED = "*"
EPS = 1e-9  # docs/guide/anonymize.md: bounds (entropy log ℓ, EMD t, δ) are compared with a 1e-9 tolerance
METRICS = ("height", "precision", "precision-star", "loss", "aecs", "discernibility",
           "discernibility-star", "entropy", "nonuniform-entropy", "nonuniform-entropy-monotonic", "ambiguity",
           "kl-divergence")


# ----------------------------------------------------------------------------- input
def read_table(path: str | Path, delimiter: str = ";") -> tuple[list[str], list[list[str]]]:
    """Header and rows of a `;`-separated table (stdlib csv, no fedanon code)."""
    with open(path, newline="", encoding="utf-8") as fh:
        lines = [row for row in csv.reader(fh, delimiter=delimiter) if row]
    return lines[0], lines[1:]


def read_hierarchy(path: str | Path, delimiter: str = ";") -> list[list[str]]:
    """ARX hierarchy rows: a leaf value followed by its generalization at each level."""
    with open(path, newline="", encoding="utf-8") as fh:
        return [row for row in csv.reader(fh, delimiter=delimiter) if row]


@dataclass
class Model:
    """What to anonymize for; plain data, deliberately not the engine's config class."""

    qis: list[str]
    k: int = 1
    l_diversity: tuple[str, float, float | None, str] | None = None  # (variant, l, c, attribute)
    t_closeness: tuple[float, str, str] | None = None  # (t, "equal" | "hierarchical", attribute)
    delta_presence: tuple[float, float] | None = None  # (dmin, dmax)
    subset: list[bool] | None = None  # research subset flags (δ-presence)
    beta_likeness: tuple[float, str, str] | None = None  # (β, "basic" | "enhanced", attribute)
    p_sensitive: tuple[int, str] | None = None  # (p, attribute)
    alpha_k: tuple[float, str] | None = None  # (α, attribute)
    highest_risk: float | None = None  # τ: every released record's prosecutor risk 1/|E| ≤ τ
    average_risk: float | None = None  # τ: mean over released records of 1/|E| ≤ τ
    k_map: tuple[int, int, str, float] | None = None  # (k, population N, "poisson" | "zero-truncated", α)
    k_map_population: int | None = None  # k against the input as population; `subset` = released rows
    population_uniqueness: tuple | None = None  # (τ, π[, "pitman" | "zayatz" | "snb" | "dankar"])
    # (L, K, C, attribute, sensitive values or None = all): Mohammed et al. 2009, judged on the
    # projections of the released rows onto every set of at most L QIs
    lkc: tuple[int, int, float, str, list[str] | None] | None = None
    suppression: float = 0.0
    metric: str = "nonuniform-entropy"
    # ARX's attribute weights: QI -> weight (QIs not named weigh 1); each QI's term of the metric
    # is multiplied by its weight times q / (sum of the weights), so that equal weights change nothing
    weights: dict[str, float] | None = None

    def weight(self, qi: int) -> float:
        given = self.weights or {}
        raw = [given.get(q, 1.0) for q in self.qis]
        return raw[qi] * len(raw) / sum(raw)

    @property
    def implied_class_size(self) -> int:
        """p of eq. 2.24: k for k-anonymity, ℓ for ℓ-diversity (the larger if both)."""
        p = self.k
        if self.l_diversity is not None:
            p = max(p, int(math.ceil(self.l_diversity[1] - EPS)))
        return max(p, 1)


class Tree:
    """One hierarchy as dicts: leaf -> value per level, and leaves below each value."""

    def __init__(self, rows: Sequence[Sequence[str]]) -> None:
        self.rows = [list(r) for r in rows]
        self.height = len(self.rows[0])  # number of levels incl. level 0
        self.gen = {r[0]: r for r in self.rows}
        self.leaves_below: list[Counter] = [Counter(r[level] for r in self.rows) for level in range(self.height)]

    @property
    def max_level(self) -> int:
        return self.height - 1

    def at(self, value: str, level: int) -> str:
        return self.gen[value][level]


@dataclass
class NodeResult:
    levels: tuple[int, ...]
    classes: dict[tuple[str, ...], list[int]]
    failing: set[tuple[str, ...]] = field(default_factory=set)
    suppressed_rows: set[int] = field(default_factory=set)
    anonymous: bool = False
    loss: float = math.inf


# ----------------------------------------------------------------------------- models
def shannon(counts: Iterable[int], log=math.log) -> float:
    counts = [c for c in counts if c]
    total = sum(counts)
    return -sum(c / total * log(c / total) for c in counts)


def l_diverse(values: Sequence[str], variant: str, l: float, c: float | None) -> bool:
    """Machanavajjhala et al. (dissertation §2.4.2, eq. 2.1)."""
    counts = Counter(values)
    if variant == "distinct":
        return len(counts) >= l - EPS
    if variant == "entropy":
        return shannon(counts.values()) >= math.log(l) - EPS
    r = sorted(counts.values(), reverse=True)  # r_1 >= r_2 >= ... >= r_m
    return r[0] < c * sum(r[int(l) - 1:])  # r_1 < c (r_l + ... + r_m)


def emd_equal(p: dict[str, float], q: dict[str, float]) -> float:
    """Eq. 2.3: ½ Σ |p_i − q_i|."""
    keys = set(p) | set(q)
    return 0.5 * sum(abs(p.get(v, 0.0) - q.get(v, 0.0)) for v in keys)


def emd_hierarchical(p: dict[str, float], q: dict[str, float], tree: Tree) -> float:
    """Eqs. 2.4–2.8: Σ over inner nodes N of height(N)/H · min(pos_extra(N), neg_extra(N))."""
    H = tree.max_level
    if H == 0:
        return 0.0
    extra = {leaf: p.get(leaf, 0.0) - q.get(leaf, 0.0) for leaf in tree.gen}  # eq. 2.8, leaves
    cost = 0.0
    for level in range(1, H + 1):
        children: dict[str, dict[str, float]] = defaultdict(dict)
        for row in tree.rows:
            children[row[level]][row[level - 1]] = extra[row[level - 1]]
        extra = {}
        for parent, kids in children.items():
            xs = list(kids.values())
            pos = sum(x for x in xs if x > 0)  # eq. 2.6
            neg = sum(-x for x in xs if x < 0)  # eq. 2.7
            cost += level / H * min(pos, neg)  # eq. 2.5
            extra[parent] = sum(xs)  # eq. 2.8, inner node
    return cost


def beta_like(values: Sequence[str], table: dict[str, float], beta: float, variant: str) -> bool:
    """Cao & Karras 2012: for every value s, (p(s|E) − p(s|T)) / p(s|T) ≤ β (basic) or
    ≤ min(β, −ln p(s|T)) (enhanced); values rarer in the class than in the table never fail."""
    for value, share in distribution(values).items():
        p = table[value]
        limit = beta if variant == "basic" else min(beta, -math.log(p))
        if (share - p) / p > limit + EPS:
            return False
    return True


def kmap_class_size(k: int, population: int, estimator: str, alpha: float, n: int) -> int:
    """El Emam & Dankar 2008 (D3 Poisson / D4 zero-truncated Poisson), λ = k·n/N: the smallest s
    with P(X ≥ s) ≤ α, at most k and n. Terms λ^j e^{−λ} / j! summed one by one."""
    lam = k * n / population
    total = 1.0 if estimator == "poisson" else 1.0 - math.exp(-lam)
    s = 1
    while s < min(k, n):
        below = sum(lam ** j * math.exp(-lam) / math.factorial(j)
                    for j in range(0 if estimator == "poisson" else 1, s)) / total
        if 1.0 - below <= alpha + 1e-12:   # P(X ≥ s) ≤ α
            return s
        s += 1
    return min(k, n)


def pitman_population_uniques(sizes: Sequence[int], population: float) -> float:
    """Hoshino (2001): the expected population uniques Γ(θ+1)/Γ(θ+α)·N^α (at most N) under Pitman's
    model, (θ, α) maximizing the likelihood of the class sizes. Found by maximizing the log-likelihood
    itself (golden-section search over α of the best θ, itself a golden-section search over
    ln(θ + α)), not from its derivatives. 0 without sample uniques; N when every record is one."""
    sizes = [s for s in sizes if s > 0]
    n, u = sum(sizes), len(sizes)
    if 1 not in sizes:
        return 0.0
    if u == n:
        return float(population)

    def partition_part(theta: float, alpha: float) -> float:  # the terms with θ
        return sum(math.log(theta + i * alpha) for i in range(1, u)) - sum(math.log(theta + i) for i in range(1, n))

    def size_part(alpha: float) -> float:  # the terms without θ
        return sum(math.log(k - alpha) for j in sizes for k in range(1, j))

    def golden(f, low: float, high: float, steps: int = 90) -> float:  # argmax of a unimodal f
        ratio = (math.sqrt(5) - 1) / 2
        a, b = low + (1 - ratio) * (high - low), low + ratio * (high - low)
        fa, fb = f(a), f(b)
        for _ in range(steps):
            if fa < fb:
                low, a, fa = a, b, fb
                b = low + ratio * (high - low)
                fb = f(b)
            else:
                high, b, fb = b, a, fa
                a = low + (1 - ratio) * (high - low)
                fa = f(a)
        return (low + high) / 2

    def best_theta(alpha: float) -> float:
        shift = golden(lambda t: partition_part(math.exp(t) - alpha, alpha), math.log(1e-9), math.log(1e9))
        return math.exp(shift) - alpha

    alpha = golden(lambda a: partition_part(best_theta(a), a) + size_part(a), 0.0, 1.0 - 1e-9, steps=70)
    theta = best_theta(alpha)
    return min(math.exp(math.lgamma(theta + 1) - math.lgamma(theta + alpha) + alpha * math.log(population)),
               float(population))


def zayatz_population_uniques(sizes: Sequence[int], population: float) -> float:
    """Zayatz (1991) as ARX computes it, with exact integer binomials (N must be a whole number):
    P(unique | sample unique) = f1·h(1) / Σ_i f_i·h(i), h(i) = C(i, 1)·C(N − i, n − 1) / C(N, n), and
    the sample uniques that are population uniques scaled up by N / n."""
    whole = round(population)
    assert abs(population - whole) < 1e-6, "the reference's Zayatz needs a whole population"
    sizes = [s for s in sizes if s > 0]
    n, f = sum(sizes), Counter(sizes)
    if not f[1]:
        return 0.0
    h = {i: i * math.comb(whole - i, n - 1) / math.comb(whole, n) if whole - i >= n - 1 else 0.0 for i in f}
    conditional = f[1] * h[1] / sum(f[i] * h[i] for i in f)
    return min(f[1] * conditional * whole / n, float(whole))


def snb_population_uniques(sizes: Sequence[int], fraction: float, population: float) -> float:
    """Chen & Keller-McNulty (1998), the slide negative binomial model, as Dankar et al. (2012)
    describe it: population class sizes F = 1 + NB(α, β), Bernoulli sampling with fraction π,
    (α, β) fitted by the method of moments to the sample's classes of size 1 and 2 with K from
    Haas & Stokes's Shlosser-type estimate, Û = K·β^α (at most N). The documented conventions
    (docs/guide/privacy-models.md): roots of the equations looked for with logit β in [−45, 45]
    (a grid of 901 points, each bracket refined by bisection); several roots: the largest Û;
    none: Zayatz's estimate; π = 1: the sample uniques. Written out term by term here: the
    moments are summed as written in the paper, α at each β from the quadratic in closed form."""
    sizes = [s for s in sizes if s > 0]
    f = Counter(sizes)
    if not f[1]:
        return 0.0
    if fraction >= 1:
        return float(f[1])
    q = fraction
    # Haas & Stokes (1998), the Shlosser-type estimate of the number of population classes
    k = len(sizes) + f[1] * (sum(i * q ** 2 * (1 - q ** 2) ** (i - 1) * n for i, n in f.items())
                             / sum((1 - q) ** i * ((1 + q) ** i - 1) * n for i, n in f.items())) \
        * (sum((1 - q) ** i * n for i, n in f.items()) / sum(i * q * (1 - q) ** (i - 1) * n for i, n in f.items())) ** 2
    uniques = []
    if f[2]:
        r = f[2] / f[1]

        def point(t: float) -> tuple[float, float]:
            """α solving E[s2]/E[s1] = r at β = 1/(1 + e^−t), and log(K·E[s1]/s1) there."""
            one_minus_beta = 1 / (1 + math.exp(t))
            d = (1 - q) * one_minus_beta
            # E[s2]/E[s1] = π α (1−β)(2 − (1−α)d) / (2(1−d)(1−d+αd)) = r, multiplied out:
            a = q * one_minus_beta * d
            b = q * one_minus_beta * (2 - d) - 2 * r * (1 - d) * d
            c = -2 * r * (1 - d) ** 2
            # the positive root of a·α² + b·α + c = 0 (c < 0), in a form without cancellation
            root = math.sqrt(b * b - 4 * a * c)
            alpha = (root - b) / (2 * a) if b < 0 else -2 * c / (b + root)
            # E[s1]/K = π (β/(1−d))^α (1 + αd/(1−d)); ln β and ln(1−d) keep their digits as β → 1
            log_one_minus_d = math.log1p(-d) if d < 0.5 else math.log(1 / (1 + math.exp(-t)) + q * one_minus_beta)
            e1 = q * math.exp(alpha * (-math.log1p(math.exp(-t)) - log_one_minus_d)) * (1 + alpha * d / (1 - d))
            return alpha, math.log(k * e1 / f[1]) if e1 > 0 else -math.inf

        ts = [-45 + 90 * j / 900 for j in range(901)]
        gaps = [point(t)[1] for t in ts]
        for j in range(900):
            lo, hi, g_lo = ts[j], ts[j + 1], gaps[j]
            if g_lo == 0 or g_lo * gaps[j + 1] < 0:
                for _ in range(100 if g_lo else 0):
                    mid = (lo + hi) / 2
                    g_mid = point(mid)[1]
                    lo, hi, g_lo = (mid, hi, g_mid) if g_mid * g_lo > 0 else (lo, mid, g_lo)
                alpha = point(lo)[0]
                uniques.append(k * math.exp(-alpha * math.log1p(math.exp(-lo))))
    if not uniques:
        return zayatz_population_uniques(sizes, population)
    return min(max(uniques), float(population))


def dankar_population_uniques(sizes: Sequence[int], fraction: float, population: float) -> float:
    """Dankar et al. (2012)'s decision rule as ARX applies it: π ≤ 0.1 Pitman; otherwise the lower
    of Zayatz and SNB, Zayatz alone where the SNB equations have no root."""
    if fraction <= 0.1:
        return pitman_population_uniques(sizes, population)
    zayatz = zayatz_population_uniques(sizes, population)
    return min(zayatz, snb_population_uniques(sizes, fraction, population))


def distribution(values: Sequence[str]) -> dict[str, float]:
    counts = Counter(values)
    return {v: c / len(values) for v, c in counts.items()}


# ----------------------------------------------------------------------------- reference
class Reference:
    """Brute-force optimal full-domain generalization with tuple suppression."""

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[str]],
                 hierarchies: dict[str, Sequence[Sequence[str]]], model: Model) -> None:
        self.columns = list(columns)
        self.rows = [list(r) for r in rows]
        self.model = model
        self.n = len(self.rows)
        self.trees = {q: Tree(hierarchies[q]) for q in model.qis}
        self.qi_col = [self.columns.index(q) for q in model.qis]
        self.limit = math.floor(model.suppression * self.n + 1e-9)
        self.sensitive_tree = None
        if model.t_closeness is not None and model.t_closeness[1] == "hierarchical":
            self.sensitive_tree = Tree(hierarchies[model.t_closeness[2]])
        if model.t_closeness is not None:
            col = self.columns.index(model.t_closeness[2])
            self.overall = distribution([r[col] for r in self.rows])  # whole input (docs/guide/anonymize.md)

    # -- lattice ------------------------------------------------------------------
    def nodes(self) -> list[tuple[int, ...]]:
        """Every node, in the documented stable order: total level, then lexicographic."""
        ranges = [range(self.trees[q].height) for q in self.model.qis]
        return sorted(itertools.product(*ranges), key=lambda lv: (sum(lv), lv))

    def generalize(self, row: Sequence[str], levels: Sequence[int]) -> tuple[str, ...]:
        return tuple(self.trees[q].at(row[c], lv) for q, c, lv in zip(self.model.qis, self.qi_col, levels))

    # -- models -------------------------------------------------------------------
    def class_ok(self, members: list[int]) -> bool:
        m = self.model
        others = (m.l_diversity, m.t_closeness, m.delta_presence, m.beta_likeness, m.p_sensitive, m.alpha_k,
                  m.highest_risk, m.average_risk, m.k_map, m.k_map_population, m.population_uniqueness, m.lkc)
        if (m.k > 1 or all(model is None for model in others)) \
                and len(members) < m.k:
            return False
        if m.l_diversity is not None:
            variant, l, c, attr = m.l_diversity
            col = self.columns.index(attr)
            if not l_diverse([self.rows[i][col] for i in members], variant, l, c):
                return False
        if m.t_closeness is not None:
            t, kind, attr = m.t_closeness
            col = self.columns.index(attr)
            p = distribution([self.rows[i][col] for i in members])
            d = emd_equal(p, self.overall) if kind == "equal" else emd_hierarchical(p, self.overall, self.sensitive_tree)
            if d > t + EPS:
                return False
        if m.beta_likeness is not None:
            beta, variant, attr = m.beta_likeness
            if not beta_like(self.column(members, attr), self.table_distribution(attr), beta, variant):
                return False
        if m.p_sensitive is not None:  # Truta & Vinay 2006: at least p distinct sensitive values
            p, attr = m.p_sensitive
            if len(set(self.column(members, attr))) < p:
                return False
        if m.alpha_k is not None:  # Wong et al. 2006: no sensitive value above share α
            alpha, attr = m.alpha_k
            if max(distribution(self.column(members, attr)).values()) > alpha + EPS:
                return False
        if m.highest_risk is not None and 1 / len(members) > m.highest_risk + EPS:
            return False
        if m.k_map is not None and len(members) < kmap_class_size(*m.k_map, n=self.n):
            return False
        if m.k_map_population is not None and any(m.subset[i] for i in members) and len(members) < m.k_map_population:
            return False  # released rows that match fewer than k people of the population
        if m.delta_presence is not None:
            dmin, dmax = m.delta_presence
            inside = sum(1 for i in members if m.subset[i])
            if inside and not (dmin - EPS <= inside / len(members) <= dmax + EPS):
                return False
        return True

    def column(self, members: list[int], attribute: str) -> list[str]:
        """The values of `attribute` in the given rows."""
        col = self.columns.index(attribute)
        return [self.rows[i][col] for i in members]

    def table_distribution(self, attribute: str) -> dict[str, float]:
        """The distribution of `attribute` over the whole input (models relative to the table)."""
        return distribution(self.column(list(range(self.n)), attribute))

    def evaluate(self, levels: Sequence[int]) -> NodeResult:
        classes: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for i, row in enumerate(self.rows):
            classes[self.generalize(row, levels)].append(i)
        res = NodeResult(tuple(levels), dict(classes))
        res.failing = {key for key, members in classes.items() if not self.class_ok(members)}
        while True:  # the release-wide rules, each adding classes, until none adds one
            before = len(res.failing)
            if self.model.average_risk is not None:
                res.failing |= self.risk_suppression(classes, res.failing, self.model.average_risk)
            if self.model.population_uniqueness is not None:
                tau, fraction, *named = self.model.population_uniqueness
                kept = {key: len(members) for key, members in classes.items() if key not in res.failing}
                population = self.n / fraction
                if named == ["snb"]:
                    def estimate(sizes: list[int], population: float) -> float:
                        return snb_population_uniques(sizes, fraction, population)
                elif named == ["dankar"]:
                    def estimate(sizes: list[int], population: float) -> float:
                        return dankar_population_uniques(sizes, fraction, population)
                else:
                    estimate = zayatz_population_uniques if named == ["zayatz"] else pitman_population_uniques
                if 1 in kept.values() and estimate(list(kept.values()), population) / population > tau + EPS:
                    res.failing |= {key for key, size in kept.items() if size == 1}  # every sample unique goes
            if self.model.lkc is not None:
                res.failing |= self.lkc_suppression(classes, res.failing, *self.model.lkc)
            if len(res.failing) == before:
                break
        res.suppressed_rows = {i for key in res.failing for i in classes[key]}
        res.anonymous = len(res.suppressed_rows) <= self.limit
        if res.anonymous:
            res.loss = self.metric(res)
        return res

    @staticmethod
    def risk_suppression(classes: dict[tuple[str, ...], list[int]], failing: set, tau: float) -> set:
        """The classes the average-risk rule adds (docs/guide/privacy-models.md): try keeping only
        the classes of at least m rows, m = 1, 2, ...; the first m whose kept classes / kept
        records is at most τ wins; if none does, every class goes."""
        kept = {key: len(members) for key, members in classes.items() if key not in failing}
        for m in range(1, max(kept.values(), default=0) + 1):
            left = [size for size in kept.values() if size >= m]
            if left and len(left) <= (tau + EPS) * sum(left):
                return {key for key, size in kept.items() if size < m}
        return set(kept)

    def lkc_suppression(self, classes: dict[tuple[str, ...], list[int]], failing: set, l: int, k: int, c: float,
                        attribute: str, values: list[str] | None) -> set:
        """The classes LKC-privacy suppresses: of the released rows, take every set Q of at most L
        QIs and every combination q of values of Q they show; where fewer than K rows show q, or
        a value of the sensitive set has a share above C among them, every class showing q goes.
        Repeated on the rows left until no combination fails."""
        col = self.columns.index(attribute)
        out: set = set()
        while True:
            kept = [key for key in classes if key not in failing and key not in out]
            bad: set = set()
            for size in range(1, min(l, len(self.model.qis)) + 1):
                for qs in itertools.combinations(range(len(self.model.qis)), size):
                    rows_of: dict[tuple[str, ...], list[int]] = defaultdict(list)
                    for key in kept:
                        rows_of[tuple(key[i] for i in qs)].extend(classes[key])
                    for q, members in rows_of.items():
                        counts = Counter(self.rows[i][col] for i in members)
                        if len(members) < k or any(n / len(members) > c + EPS for v, n in counts.items()
                                                   if values is None or v in values):
                            bad |= {key for key in kept if tuple(key[i] for i in qs) == q}
            if not bad:
                return out
            out |= bad

    # -- metrics (cell by cell) -----------------------------------------------------
    def metric(self, res: NodeResult, name: str | None = None) -> float:
        return getattr(self, "m_" + (name or self.model.metric).replace("-", "_"))(res)

    def _mh(self, q: str) -> int:
        return self.trees[q].max_level

    def m_height(self, res: NodeResult) -> float:
        """Eq. 2.19: Σ k_i (weighted: Σ w_i k_i)."""
        return float(sum(self.model.weight(i) * lv for i, lv in enumerate(res.levels)))

    def m_precision_star(self, res: NodeResult) -> float:
        """1 − PM* (eq. 2.21): mean over QIs of k_i / mh_i."""
        return sum(self.model.weight(i) * (lv / self._mh(q) if self._mh(q) else 0.0)
                   for i, (q, lv) in enumerate(zip(self.model.qis, res.levels))) / len(self.model.qis)

    def m_precision(self, res: NodeResult) -> float:
        """1 − PM (eq. 2.20) over cells; a suppressed cell is maximally generalized (= 1)."""
        total = 0.0
        for i in range(self.n):
            for j, (q, lv) in enumerate(zip(self.model.qis, res.levels)):
                w = self.model.weight(j)
                if i in res.suppressed_rows:
                    total += w
                else:
                    total += w * (lv / self._mh(q) if self._mh(q) else 0.0)
        return total / (self.n * len(self.model.qis))

    def m_loss(self, res: NodeResult) -> float:
        """Eq. 2.22: mean over cells of (L_R − 1)/(L_top − 1); suppressed cells count 1."""
        total = 0.0
        for i, row in enumerate(self.rows):
            for j, (q, c, lv) in enumerate(zip(self.model.qis, self.qi_col, res.levels)):
                tree = self.trees[q]
                w = self.model.weight(j)
                if i in res.suppressed_rows:
                    total += w
                    continue
                top = len(tree.rows)
                if top > 1:
                    total += w * (tree.leaves_below[lv][tree.at(row[c], lv)] - 1) / (top - 1)
        return total / (self.n * len(self.model.qis))

    def m_ambiguity(self, res: NodeResult) -> float:
        """Nergiz & Clifton's ambiguity over the table's own domains: per row, the product over QIs of
        how many of the column's values (in the table) share the row's generalized value; a
        suppressed row counts the product of the domain sizes; the mean over rows."""
        domains = [sorted({row[c] for row in self.rows}) for c in self.qi_col]
        total = 0.0
        for i, row in enumerate(self.rows):
            product = 1
            for q, c, lv, domain in zip(self.model.qis, self.qi_col, res.levels, domains):
                if i in res.suppressed_rows:
                    product *= len(domain)
                else:
                    tree = self.trees[q]
                    product *= sum(1 for v in domain if tree.at(v, lv) == tree.at(row[c], lv))
            total += product
        return total / self.n

    def m_kl_divergence(self, res: NodeResult) -> float:
        """Kifer & Gehrke's KL divergence in bits: P the input's QI tuples, Q the release with each
        released row's mass 1/n spread evenly over every tuple of the table's domains its
        generalized values cover (a suppressed row over the whole domain); Σ_t p(t) log2(p(t)/q(t))
        over the tuples of the input. Written over rows: q(t) sums every row's share at t."""
        domains = [sorted({row[c] for row in self.rows}) for c in self.qi_col]
        whole = math.prod(len(d) for d in domains)
        p = Counter(tuple(row[c] for c in self.qi_col) for row in self.rows)
        covers: list[tuple[set[str], ...] | None] = []  # per row: the values each released QI cell covers
        for i, row in enumerate(self.rows):
            if i in res.suppressed_rows:
                covers.append(None)
                continue
            cells = []
            for q, c, lv, domain in zip(self.model.qis, self.qi_col, res.levels, domains):
                tree = self.trees[q]
                cells.append({v for v in domain if tree.at(v, lv) == tree.at(row[c], lv)})
            covers.append(tuple(cells))
        total = 0.0
        for t, count in p.items():
            q_t = 0.0
            for cover in covers:
                if cover is None:
                    q_t += 1 / (self.n * whole)
                elif all(v in cell for v, cell in zip(t, cover)):
                    q_t += 1 / (self.n * math.prod(len(cell) for cell in cover))
            total += count / self.n * math.log2(count / self.n / q_t)
        return total

    def m_aecs(self, res: NodeResult) -> float:
        """n / (classes of the output table): kept classes + one class of all suppressed rows."""
        kept = len(res.classes) - len(res.failing)
        return self.n / (kept + (1 if res.failing else 0))

    def m_discernibility(self, res: NodeResult) -> float:
        """Eq. 2.25: Σ_{E∉O} |E|² + Σ_{E∈O} m·|E|."""
        return float(sum(len(m) ** 2 if key not in res.failing else self.n * len(m)
                         for key, m in res.classes.items()))

    def m_discernibility_star(self, res: NodeResult) -> float:
        """DM* as in table 2.15 / FLASH: Σ |E|² over all classes (suppression ignored)."""
        return float(sum(len(m) ** 2 for m in res.classes.values()))

    def _x(self, i: int, qi: int, level: int) -> float:
        """Eq. 2.28: X(i, j, k) = |rows with j's original value| / |rows with j's value at level k|."""
        q, c = self.model.qis[qi], self.qi_col[qi]
        tree = self.trees[q]
        value = self.rows[i][c]
        same = sum(1 for r in self.rows if r[c] == value)
        same_gen = sum(1 for r in self.rows if tree.at(r[c], level) == tree.at(value, level))
        return same / same_gen

    def _y(self, i: int, qi: int, level: int, suppressed: set[int]) -> float:
        """Eq. 3.3: Y = |suppressed rows with i's value at level k| / |S|."""
        q, c = self.model.qis[qi], self.qi_col[qi]
        tree = self.trees[q]
        mine = tree.at(self.rows[i][c], level)
        return sum(1 for j in suppressed if tree.at(self.rows[j][c], level) == mine) / len(suppressed)

    def m_nonuniform_entropy(self, res: NodeResult) -> float:
        """Eqs. 2.29 + 3.5: −Σ_cells log2 X − Σ_{QIs} Σ_{j∈S} log2 Y."""
        total = 0.0
        for qi, lv in enumerate(res.levels):
            w = self.model.weight(qi)
            for i in range(self.n):
                total -= w * math.log2(self._x(i, qi, lv))
            for i in res.suppressed_rows:
                total -= w * math.log2(self._y(i, qi, lv, res.suppressed_rows))
        return total

    def m_nonuniform_entropy_monotonic(self, res: NodeResult) -> float:
        """Eq. 2.29 / 3.2 alone: −Σ_cells log2 X over all rows, suppression not charged (monotone)."""
        return -sum(self.model.weight(qi) * math.log2(self._x(i, qi, lv))
                    for qi, lv in enumerate(res.levels) for i in range(self.n))

    def m_entropy(self, res: NodeResult) -> float:
        """Eq. 2.27 (−Σ X log2 X) plus the analogous suppression term −Σ Y log2 Y (engine's extension)."""
        total = 0.0
        for qi, lv in enumerate(res.levels):
            w = self.model.weight(qi)
            for i in range(self.n):
                x = self._x(i, qi, lv)
                total -= w * x * math.log2(x)
            for i in res.suppressed_rows:
                y = self._y(i, qi, lv, res.suppressed_rows)
                total -= w * y * math.log2(y)
        return total

    # -- dissertation-literal variants (see module docstring) -------------------------
    def precision_dissertation(self, res: NodeResult) -> float:
        """PM of eq. 2.20 (higher = better)."""
        return 1.0 - self.m_precision(res)

    def aecs_dissertation(self, res: NodeResult) -> float:
        """Eq. 2.24: m / (EC · p)."""
        return self.m_aecs(res) / self.model.implied_class_size

    def discernibility_star_dissertation_literal(self, res: NodeResult) -> float:
        """Eq. 2.26 as printed: Σ_{E∉O} |E|²."""
        return float(sum(len(m) ** 2 for key, m in res.classes.items() if key not in res.failing))

    # -- search ---------------------------------------------------------------------------
    def optimum(self) -> NodeResult | None:
        """Best anonymous node: lowest loss (1e-9 relative tolerance = tie), then stable order."""
        best: NodeResult | None = None
        for levels in self.nodes():  # stable order, so the first of tied nodes is kept
            res = self.evaluate(levels)
            if not res.anonymous:
                continue
            if best is None or res.loss < best.loss - 1e-9 * max(1.0, abs(best.loss)):
                best = res
        return best

    def output(self, res: NodeResult) -> list[list[str]]:
        """The released table: QI cells generalized, suppressed rows `*` in every QI."""
        out = []
        for i, row in enumerate(self.rows):
            new = list(row)
            gen = self.generalize(row, res.levels)
            for c, value in zip(self.qi_col, gen):
                new[c] = SUPPRESSED if i in res.suppressed_rows else value
            out.append(new)
        return out
