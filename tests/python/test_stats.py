"""fqntrace.analysis.stats against values worked out by hand (and, for the record, equal to scipy's
mannwhitneyu(alternative="two-sided"), which the package does not depend on)."""

import math

import pytest
from fqntrace.analysis import stats


def test_u_counts_pairs_where_the_first_sample_is_larger_ties_counting_one_half():
    # x = 1, 2, 2 against y = 2, 3: pairs with x > y: none; ties (2, 2): two halves -> U = 1.
    assert stats.mann_whitney([1, 2, 2], [2, 3])[0] == 1.0
    assert stats.mann_whitney([2, 3], [1, 2, 2])[0] == 5.0  # U(x, y) + U(y, x) = 3 * 2
    ranks, ties = stats.rank_with_ties([1, 2, 2, 2, 3])
    assert ranks == [1.0, 3.0, 3.0, 3.0, 5.0] and ties == [3]


def test_exact_null_distribution_of_u():
    # 2 vs 2: of the C(4, 2) = 6 orders, U = 0, 1, 2, 3, 4 in 1, 1, 2, 1, 1 of them.
    assert stats._exact_counts(2, 2) == (1, 1, 2, 1, 1)
    assert sum(stats._exact_counts(3, 3)) == 20
    assert sum(stats._exact_counts(4, 4)) == 70


def test_separated_samples_get_the_smallest_exact_p_value():
    # 3 vs 3 completely apart: U = 0, P(U <= 0) = 1/20, two-sided 0.1 (never below 0.05).
    u, p, method = stats.mann_whitney([1, 2, 3], [4, 5, 6])
    assert (u, method) == (0.0, "exact") and p == pytest.approx(0.1)
    # 4 vs 4: 2 / 70.
    assert stats.mann_whitney([1, 2, 3, 4], [5, 6, 7, 8])[1] == pytest.approx(2 / 70)
    # Interleaved 5 vs 6: U = 10; P(U <= 10) = 99 / 462 (counted from the distribution), p = 2x.
    u, p, _ = stats.mann_whitney([1, 3, 5, 7, 9], [2, 4, 6, 8, 10, 12])
    assert u == 10.0
    assert sum(stats._exact_counts(5, 6)[:11]) == 99
    assert p == pytest.approx(2 * 99 / 462)


def test_ties_use_the_normal_approximation_with_tie_correction():
    # x = 1, 2, 2; y = 2, 3: U = 1, mean 3, one tie group of 3:
    # var = 3*2/12 * ((5 + 1) - (27 - 3) / (5 * 4)) = 0.5 * 4.8 = 2.4
    # z = (|1 - 3| - 0.5) / sqrt(2.4) = 0.968246, p = erfc(z / sqrt 2) = 0.332922
    u, p, method = stats.mann_whitney([1, 2, 2], [2, 3])
    assert (u, method) == (1.0, "normal")
    assert p == pytest.approx(math.erfc(1.5 / math.sqrt(2.4) / math.sqrt(2)))
    assert p == pytest.approx(0.332922, abs=1e-6)


def test_all_equal_samples_are_never_different():
    assert stats.mann_whitney([5, 5, 5], [5, 5, 5])[1] == 1.0
    assert stats.mann_whitney([0.0] * 11, [0.0] * 11)[1] == 1.0
    c = stats.Comparison([2.0] * 8, [2.0] * 8)
    assert c.shift == 0 and c.low == 0 and c.high == 0 and not c.significant(0.05)
    assert stats.mad([3, 3, 3]) == 0 and stats.spread_pct([3, 3, 3]) == 0


def test_hodges_lehmann_shift_and_interval():
    # y - x over all pairs of 1..4 and 5..8: 1..7 with counts 1,2,3,4,3,2,1; median 4.
    # alpha 0.05, 4 vs 4: 2 P(U <= 0) = 2/70 <= 0.05 < 2 P(U <= 1) = 4/70: k = 1, the interval
    # is the 1st to the 16th difference: [1, 7].
    assert stats.hodges_lehmann([1, 2, 3, 4], [5, 6, 7, 8]) == (4, 1, 7)
    # 3 vs 3 can never reach 0.05: the interval is every difference's range.
    assert stats.hodges_lehmann([1, 2, 3], [4, 5, 6]) == (3, 1, 5)
    # 5 vs 5 apart by 10: P(U <= 2) = 4/252 -> 2P = 0.032 <= 0.05 < 2P(U <= 3) = 0.056: k = 3,
    # the interval runs from the 3rd to the 23rd of the 25 differences (6..14): [7, 13].
    x, y = [1, 2, 3, 4, 5], [11, 12, 13, 14, 15]
    assert stats._exact_counts(5, 5)[:4] == (1, 1, 2, 3)
    assert stats.hodges_lehmann(x, y) == (10, 7, 13)


def test_comparison_in_percent_of_the_base_median():
    base = [10.0, 10.2, 9.9, 10.1, 9.7, 9.8, 10.3]
    new = [v * 1.3 for v in base]
    c = stats.Comparison(base, new)
    assert c.base_median == 10.0 and c.new_median == pytest.approx(13.0)
    assert c.pct(c.shift) == pytest.approx(30.0, abs=1.0)
    assert c.pct(c.low) > 20 and c.significant(0.05) and c.method == "exact"
    same = stats.Comparison(base, list(reversed(base)))
    assert same.shift == 0 and not same.significant(0.05) and same.low < 0 < same.high


def test_robust_spread_ignores_one_odd_step():
    steps = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 50.0]  # one step preempted
    assert stats.median(steps) == 10.0
    assert stats.mad(steps) == pytest.approx(0.1)
    assert stats.spread_pct(steps) == pytest.approx(1.4826, rel=1e-6)
    assert stats.spread_pct([0, 0, 0]) is None


def test_normal_quantile_without_scipy():
    assert stats._z_two_sided(0.05) == pytest.approx(1.959964, abs=1e-6)
    assert stats._z_two_sided(0.01) == pytest.approx(2.575829, abs=1e-6)
