"""Per-note work spread over forked worker processes, results in order, the same as doing it in a loop.

``convert``'s per-note steps (read, parse, fields; rewrite, render) are pure Python, so threads cannot run
them side by side. Forked workers can: each inherits the parent's state as it is at the fork (the walk, the
resolutions), is sent only the numbers of its chunk, and sends back each note's result. The results are those
of the loop, in the loop's order, so the bundle is byte for byte the one a single process writes
(tests/test_workers.py).

Used only where it pays and is safe: on Linux (``fork``), with more than one CPU, for at least ``MIN_ITEMS``
items. ``VAULT2OKF_WORKERS=1`` turns it off; ``=N`` uses N workers whenever there are two chunks or more. A
chunk whose worker fails (its result cannot be sent back, the worker died) is done again in the parent; so is
everything when the pool cannot start. Workers ignore Ctrl-C (the parent stops them) and die with the parent,
so a ``kill -9`` of a convert leaves no process writing into its staging folder.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MIN_ITEMS = 200  # below this a loop is as fast as forking and starting the workers
MAX_WORKERS = 8
CHUNK = 48  # items per task: few enough messages, small enough to keep every worker busy to the end
_PR_SET_PDEATHSIG = 1

_job: tuple[Callable[[Any], Any], Sequence[Any], Callable[[], None]] | None = None  # what the forked workers inherit


def workers() -> tuple[int, bool]:
    """How many workers a parallel map uses here (1: none), and whether the user set it."""
    wanted = os.environ.get("VAULT2OKF_WORKERS", "").strip()
    if wanted.isdigit():
        return max(1, min(int(wanted), 64)), True
    if sys.platform != "linux" or "fork" not in multiprocessing.get_all_start_methods():
        return 1, False
    return max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS)), False


def parallel_map(fn: Callable[[T], R], items: Sequence[T], finish: Callable[[], None] = lambda: None) -> list[R]:
    """``[fn(x) for x in items]``, spread over forked workers where that pays (``parallel_chunks``)."""
    return [r for chunk in parallel_chunks(fn, items, finish) for r in chunk]


def parallel_chunks(
    fn: Callable[[T], R], items: Sequence[T], finish: Callable[[], None] = lambda: None
) -> Iterator[list[R]]:
    """``[fn(x) for x in items]`` a chunk at a time, in order, spread over forked workers where that pays.
    ``fn`` runs in the workers against the state the parent had when it called this: it must not rely on
    changes it makes to it. ``finish`` runs after each chunk, where the chunk ran (to wait for work ``fn``
    left running)."""
    chunks = [range(i, min(i + CHUNK, len(items))) for i in range(0, len(items), CHUNK)]
    n, chosen = workers()
    done = 0
    if n >= 2 and len(chunks) >= 2 and (chosen or len(items) >= MIN_ITEMS):
        global _job
        _job = (fn, items, finish)
        gc.freeze()  # the inherited objects stay out of the workers' collections, which would copy every page
        context = multiprocessing.get_context("fork")
        pool = ProcessPoolExecutor(
            min(n, len(chunks)), mp_context=context, initializer=_start_worker, initargs=(os.getpid(),)
        )
        try:
            try:
                pending = [pool.submit(_run_chunk, c.start, c.stop) for c in chunks]  # the workers start here
            except (OSError, BrokenProcessPool):  # no processes to be had (limits, memory): the loop does it
                pending = []
            for chunk, result in zip(chunks, pending, strict=False):
                yield _collect(result, fn, items, chunk, finish)
                done += 1
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # stopped early: the chunks not started are dropped
            _job = None
            gc.unfreeze()
    for chunk in chunks[done:]:
        yield _loop(fn, items, chunk, finish)


def _loop(fn: Callable[[Any], Any], items: Sequence[Any], chunk: range, finish: Callable[[], None]) -> list[Any]:
    out = [fn(items[i]) for i in chunk]
    finish()
    return out


def _collect(
    result: Future[list[Any]], fn: Callable[[Any], Any], items: Sequence[Any], chunk: range, finish: Callable[[], None]
) -> list[Any]:
    try:
        return list(result.result())
    except Exception:  # noqa: BLE001 - a result that could not be sent back, a worker that died: do it here
        return _loop(fn, items, chunk, finish)


def _run_chunk(start: int, stop: int) -> list[Any]:
    assert _job is not None
    fn, items, finish = _job
    return _loop(fn, items, range(start, stop), finish)


def _start_worker(parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the parent, which stops the pool
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)
