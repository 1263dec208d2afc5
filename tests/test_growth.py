"""The growth helper itself: it passes linear work, fails quadratic work, and lets work below the timer's noise pass."""

import pytest

from tests.growth import assert_linear


def _quadratic(n: int) -> int:
    text = "a" * n
    return sum(text.count("a", i) for i in range(n))  # n scans of up to n characters


def test_quadratic_work_fails():
    with pytest.raises(AssertionError, match="grows faster than linearly"):
        assert_linear(_quadratic, "n scans of n", start=256)


def test_linear_work_passes():
    assert_linear(lambda n: sum(range(n)), "a sum of n")


def test_work_under_the_timer_floor_passes():
    assert_linear(lambda n: n + 1, "one addition")
