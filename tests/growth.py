"""Growth checks instead of wall-clock limits: the time at n and at FACTOR * n must grow about linearly.
Linear work grows by ~FACTOR, quadratic by ~FACTOR**2.

Times are this process's CPU time (best of a few runs), not wall time: on a shared machine a short run can
fit between other jobs' time slices while a long one cannot, which inflates wall-time ratios by up to the
number of jobs per core; CPU time does not see the other jobs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

MIN_SECONDS = 0.04  # n doubles until one run takes this long, so timer noise stays small against it
FACTOR = 4
MAX_RATIO = 6.0  # 1.5x linear growth


def best_time(work: Callable[[int], object], n: int, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        work(n)
        times.append(time.process_time() - start)
    return min(times)


def growth(work: Callable[[int], object], start: int = 1024) -> tuple[int, float, float]:
    """(n, time at n, time at FACTOR * n), n the first power of two from ``start`` where one run takes MIN_SECONDS."""
    n = start
    while best_time(work, n, repeats=1) < MIN_SECONDS and n < 2**18:
        n *= 2
    return n, best_time(work, n), best_time(work, FACTOR * n, repeats=3)


def assert_linear(work: Callable[[int], object], what: str, start: int = 1024, tries: int = 2) -> None:
    """Growth below MAX_RATIO in the best of ``tries`` measurements: a burst of load on a shared machine can
    spoil one, while superlinear code fails every one (quadratic work grows by ~16 each time).

    Work still under MIN_SECONDS at FACTOR * 2**18 passes: its times are timer noise (a ratio of 0.000 s to
    0.001 s says nothing), and no superlinear work over a million units finishes that fast."""
    seen = []
    for _ in range(tries):
        n, t1, t2 = growth(work, start)
        seen.append(f"{n} -> {t1:.3f}s, {FACTOR * n} -> {t2:.3f}s (ratio {t2 / t1:.1f})")
        if t2 / t1 < MAX_RATIO or t2 < MIN_SECONDS:
            return
    raise AssertionError(f"{what} grows faster than linearly: " + "; ".join(seen))
