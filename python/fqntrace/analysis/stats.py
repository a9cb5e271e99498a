"""Statistics of per-step samples, for `diff` (the gate), `summary` (noise flags) and `report`.

Plain Python, no scipy: the CLI must stay light. What is here:

* median / MAD, and the robust spread ``1.4826 * MAD / median`` in percent (for normal data
  1.4826 * MAD estimates the standard deviation);
* the Mann-Whitney U test (two-sided), the rank test Google Benchmark's ``tools/compare.py`` runs on
  repetitions: exact null distribution for small samples without ties, else the normal
  approximation with the tie correction and a continuity correction (as scipy's
  ``mannwhitneyu(method="auto")``);
* the Hodges-Lehmann shift (the median of all pairwise differences NEW - BASE) with its
  distribution-free confidence interval, which inverts the same U test: the estimate and the
  interval the gate prints belong to the p-value it prints;
* the speed of each step (step_speeds): how fast the machine ran that step, read from every
  module at once, so that a module's time can be compared at one speed.
"""

import functools
import math
import statistics

MAD_TO_SIGMA = 1.4826
EXACT_MAX = 400  # n1 * n2 up to which the exact distribution is used (no ties)


def median(values):
    return statistics.median(values) if values else 0.0


def mad(values):
    """Median absolute deviation from the median (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    m = statistics.median(values)
    return statistics.median(abs(v - m) for v in values)


def spread_pct(values):
    """1.4826 * MAD / median in percent: a step-to-step coefficient of variation that one odd
    step does not move. None when the median is 0."""
    m = median(values)
    if m <= 0:
        return None
    return 100.0 * MAD_TO_SIGMA * mad(values) / m


def rank_with_ties(values):
    """1-based ranks, tied values sharing the mean of their ranks; and the sizes of the tie
    groups (for the variance correction)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mean_rank = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[order[k]] = mean_rank
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


@functools.lru_cache(maxsize=64)  # every module of a diff has the same step counts
def _exact_counts(n1, n2):
    """counts[u] = number of arrangements of n1 + n2 distinct values giving U = u (of the
    first sample), by the recurrence on where the largest value goes."""
    # table[(a, b)] over a <= n1, b <= n2, built bottom-up on lists of counts.
    prev = [[1] for _ in range(n2 + 1)]  # a = 0: U is 0 whatever b
    for a in range(1, n1 + 1):
        cur = [[1]]  # b = 0: U is 0
        for b in range(1, n2 + 1):
            # The largest of a + b values is in x (beats all b of y: U shifts by b) or in y.
            with_x = [0] * b + prev[b]
            with_y = cur[b - 1]
            size = max(len(with_x), len(with_y))
            cur.append(
                [
                    (with_x[u] if u < len(with_x) else 0) + (with_y[u] if u < len(with_y) else 0)
                    for u in range(size)
                ]
            )
        prev = cur
    return tuple(prev[n2])


def _normal_sf(z):
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def mann_whitney(x, y):
    """Two-sided Mann-Whitney U test of x against y: (U of x, p-value, method) with method
    "exact" or "normal". All values equal (no information): p = 1."""
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("mann_whitney needs two non-empty samples")
    ranks, ties = rank_with_ties(list(x) + list(y))
    u = sum(ranks[:n1]) - n1 * (n1 + 1) / 2.0
    mean = n1 * n2 / 2.0
    if not ties and n1 * n2 <= EXACT_MAX:
        counts = _exact_counts(n1, n2)
        total = sum(counts)
        k = int(round(min(u, n1 * n2 - u)))  # the distribution is symmetric
        p = min(1.0, 2.0 * sum(counts[: k + 1]) / total)
        return u, p, "exact"
    n = n1 + n2
    tie_term = sum(t**3 - t for t in ties) / (n * (n - 1))
    variance = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if variance <= 0:
        return u, 1.0, "normal"
    z = max(abs(u - mean) - 0.5, 0.0) / math.sqrt(variance)
    return u, min(1.0, 2.0 * _normal_sf(z)), "normal"


def _z_two_sided(alpha):
    """z with P(|Z| > z) = alpha, by bisection on erfc (no scipy)."""
    lo, hi = 0.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if 2.0 * _normal_sf(mid) > alpha:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def hodges_lehmann(x, y, alpha=0.05):
    """Shift of y against x: (estimate, low, high). The estimate is the median of the n1 * n2
    differences yj - xi; the interval runs from the k-th smallest to the k-th largest difference,
    k the U test's critical value at `alpha` (exact distribution when it applies, else normal),
    so it holds 0 exactly when the test is not significant (up to ties). With too few values
    for any interval at that level, the interval is all the differences' range."""
    n1, n2 = len(x), len(y)
    diffs = sorted(b - a for a in x for b in y)
    estimate = statistics.median(diffs)
    m = n1 * n2
    _, ties = rank_with_ties(list(x) + list(y))
    if not ties and m <= EXACT_MAX:
        counts = _exact_counts(n1, n2)
        total = sum(counts)
        # k = the largest c with 2 * P(U <= c - 1) <= alpha: the interval
        # [d_(k), d_(m + 1 - k)] (1-based) has coverage >= 1 - alpha.
        k, below = 0, 0
        while k < len(counts) and 2.0 * (below + counts[k]) / total <= alpha:
            below += counts[k]
            k += 1
    else:
        z = _z_two_sided(alpha)
        k = int(math.floor(m / 2.0 - z * math.sqrt(m * (n1 + n2 + 1) / 12.0)))
    if k < 1:
        return estimate, diffs[0], diffs[-1]
    return estimate, diffs[k - 1], diffs[m - k]


class Comparison:
    """BASE and NEW per-step samples of one module compared: medians, the shift of NEW against
    BASE (Hodges-Lehmann) with its interval, in ms and in percent of BASE's median, and the U
    test's p-value."""

    __slots__ = (
        "base_median",
        "new_median",
        "base_mad",
        "new_mad",
        "shift",
        "low",
        "high",
        "p_value",
        "method",
        "n_base",
        "n_new",
    )

    def __init__(self, base, new, alpha=0.05):
        self.n_base, self.n_new = len(base), len(new)
        self.base_median, self.new_median = median(base), median(new)
        self.base_mad, self.new_mad = mad(base), mad(new)
        self.shift, self.low, self.high = hodges_lehmann(base, new, alpha)
        _, self.p_value, self.method = mann_whitney(new, base)

    def pct(self, value):
        """A shift in percent of BASE's median (None when BASE's median is 0 and the shift not)."""
        if self.base_median > 0:
            return 100.0 * value / self.base_median
        return 0.0 if value == 0 else None

    def significant(self, alpha):
        return self.p_value < alpha


def step_speeds(samples, reference, min_modules=3):
    """How slow each step ran, from its modules: per step, the median over the modules of their
    time in that step divided by their `reference` time (BASE's median). Other jobs on the
    machine, its clock, a preempted step slow every module of a step alike; one module's own
    code changing moves one of the many values the median is taken over, not the median.
    `samples`: {module: [time per step]} (same length), `reference`: {module: time > 0}.
    Returns [factor per step], or None with fewer than `min_modules` modules to read it from."""
    names = [m for m in reference if m in samples and reference[m] > 0]
    if len(names) < min_modules:
        return None
    n = len(samples[names[0]])
    if any(len(samples[m]) != n for m in names):
        return None
    return [statistics.median(samples[m][k] / reference[m] for m in names) for k in range(n)]
