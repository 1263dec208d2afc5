"""Paired comparisons of two methods over the same questions: is "A beats B" more than noise?

Two methods answer the same questions, so the comparison is paired: per question, the difference in recall.
Two views of it, both reported:
- a **sign test** (exact two-sided binomial) on the questions one method won and the other lost, ties
  dropped; it asks only "does A win more often than chance?";
- a **bootstrap confidence interval** of the mean difference (questions resampled with replacement, a fixed
  seed so the same run gives the same report).
A difference is *significant* only when the sign test's p < ``ALPHA`` and the interval excludes 0; otherwise
the report says "not significant", however large the mean difference looks.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

ALPHA = 0.05
RESAMPLES = 2000
SEED = 20261201


@dataclass(frozen=True)
class Paired:
    """A against B on n questions: mean recall difference (A - B), its 95% interval, the sign test."""

    n: int
    wins: int
    losses: int
    ties: int
    mean_diff: float
    ci_low: float
    ci_high: float
    p_sign: float

    @property
    def significant(self) -> bool:
        return self.p_sign < ALPHA and (self.ci_low > 0 or self.ci_high < 0)

    @property
    def verdict(self) -> str:
        """``better``, ``worse`` or ``not significant`` (for A, against B)."""
        if not self.significant:
            return "not significant"
        return "better" if self.mean_diff > 0 else "worse"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "significant": self.significant, "verdict": self.verdict}


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided binomial p-value for ``wins`` against ``losses`` under p = 1/2 (1.0 with no decisions)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def bootstrap_ci(
    diffs: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of the mean of ``diffs`` over ``resamples`` resamples; (0, 0) for no data."""
    if not diffs:
        return 0.0, 0.0
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(resamples))
    cut = (1 - level) / 2
    low = means[int(math.floor(cut * (resamples - 1)))]
    high = means[int(math.ceil((1 - cut) * (resamples - 1)))]
    return low, high


def paired(a: Sequence[float | None], b: Sequence[float | None]) -> Paired:
    """Compare per-question scores of A and B (same order); questions where either is None are left out."""
    if len(a) != len(b):
        raise ValueError(f"paired scores need the same questions: {len(a)} against {len(b)}")
    diffs = [x - y for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    wins = sum(d > 0 for d in diffs)
    losses = sum(d < 0 for d in diffs)
    low, high = bootstrap_ci(diffs)
    mean_diff = sum(diffs) / len(diffs) if diffs else 0.0
    return Paired(
        n=len(diffs),
        wins=wins,
        losses=losses,
        ties=len(diffs) - wins - losses,
        mean_diff=round(mean_diff, 4),
        ci_low=round(low, 4),
        ci_high=round(high, 4),
        p_sign=round(sign_test(wins, losses), 4),
    )
