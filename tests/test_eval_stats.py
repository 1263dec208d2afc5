"""Paired comparisons: the sign test against hand-computed binomials, the bootstrap interval, the verdicts."""

from __future__ import annotations

import math

import pytest

from eval.stats import bootstrap_ci, paired, sign_test


def test_sign_test_matches_the_binomial():
    assert sign_test(10, 0) == pytest.approx(2 / 1024)
    assert sign_test(0, 10) == pytest.approx(2 / 1024)
    # 7 wins, 3 losses: P(X <= 3) for Binomial(10, 1/2), doubled
    assert sign_test(7, 3) == pytest.approx(2 * sum(math.comb(10, i) for i in range(4)) / 1024)
    assert sign_test(5, 5) == 1.0
    assert sign_test(0, 0) == 1.0


def test_bootstrap_interval_contains_the_mean_and_is_reproducible():
    diffs = [0.5, 0.0, 0.25, -0.25, 1.0, 0.0, 0.5, 0.0]
    low, high = bootstrap_ci(diffs)
    assert low <= sum(diffs) / len(diffs) <= high
    assert (low, high) == bootstrap_ci(diffs)
    assert bootstrap_ci([0.2] * 5) == (pytest.approx(0.2), pytest.approx(0.2))
    assert bootstrap_ci([]) == (0.0, 0.0)


def test_a_consistent_win_is_significant_and_a_coin_flip_is_not():
    strong = paired([1.0] * 12, [0.5] * 12)
    assert (strong.wins, strong.losses, strong.ties) == (12, 0, 0)
    assert strong.significant and strong.verdict == "better"
    assert paired([0.5] * 12, [1.0] * 12).verdict == "worse"
    noisy = paired([1.0, 0.0, 1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0, 0.0, 0.5])
    assert noisy.mean_diff > 0  # A looks better on average...
    assert noisy.verdict == "not significant"  # ...but 4 wins against 2 losses is noise


def test_questions_without_a_score_are_left_out():
    result = paired([1.0, None, 0.5], [0.0, 0.5, None])
    assert result.n == 1 and result.wins == 1
    with pytest.raises(ValueError, match="same questions"):
        paired([1.0], [1.0, 0.0])


def test_json_carries_the_verdict():
    data = paired([1.0] * 3, [0.0] * 3).to_json()
    assert data["verdict"] == "not significant"  # 3 wins of 3: p = 0.25
    assert data["p_sign"] == 0.25 and data["wins"] == 3
