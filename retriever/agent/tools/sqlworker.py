"""The model's SQL runs in worker processes, so its caps hold whatever DuckDB does inside one query.

DuckDB's ``memory_limit`` does not cover the vectors a list or map function builds, and ``interrupt()`` does not
stop ``list_sort`` while it sorts: ``SELECT list_sort(range(30000000))[1]`` ran 23-33 s at 4.5 GB in the server's
own process, and every other call waited behind it (issue 39, point 3). A worker (``python -m
retriever.agent.tools.sqlchild``) holds its own read-only, locked-down connection (``sandbox.connect``) with one
thread, a ``memory_limit`` and no temp space, and its address space capped by ``RLIMIT_AS`` (an allocation over it
fails inside DuckDB: an error, or the worker dies). It interrupts its own query at ``sql_seconds``; the server
kills it ``GRACE`` seconds later if it has not answered, and starts another for the next call. The server keeps up
to ``WORKERS`` of them: that many queries run side by side, and the tools' own queries never wait for one.

The pipe carries pickles between this code and a child it started (never anything a client sent as bytes).
"""

from __future__ import annotations

import os
import pickle
import resource
import select
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retriever.agent.tools.results import Limits, ToolError

WORKERS = 4  # queries run side by side; a further call waits for one (each is over within its cap)
GRACE = 1.0  # seconds past sql_seconds before a worker that has not answered is killed
START_SECONDS = 120.0  # a worker that is not ready by then (a very loaded machine) is an error
_HEADER = 8


@dataclass(frozen=True)
class QueryCost:
    """What one query cost its worker: CPU seconds and the worker's peak resident memory (bytes)."""

    cpu_seconds: float
    peak_bytes: int
    killed: bool = False


class SqlWorkers:
    """Up to ``WORKERS`` worker processes over one database file; thread-safe."""

    def __init__(self, path: Path, limits: Limits, size: int = WORKERS) -> None:
        self.path = path
        self.limits = limits
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)
        self._local = threading.local()
        self._closed = False
        weakref.finalize(self, _stop_all, self._all)  # a Sandbox dropped unclosed (`ToolContext.follow`)

    def run(self, query: str) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
        """Columns, types and rows of the model's one SELECT, run in a worker under the caps; ToolError
        otherwise (refused, failed, stopped at the time cap, or over the memory cap)."""
        lim = self.limits
        with self._slots:
            worker = self._take()
            try:
                reply = worker.ask(query, lim)
            except _Gone as gone:
                self._drop(worker)
                self._local.cost = worker.kill()
                if gone.timed_out:
                    raise ToolError(
                        f"the query ran past {lim.sql_seconds:g} s and was stopped: add a WHERE or LIMIT, or join "
                        "on ids"
                    ) from None
                raise ToolError(
                    f"the query needed more than the {lim.sql_memory_mb} MB a query may use and was stopped: "
                    "build smaller lists, add a WHERE or LIMIT"
                ) from None
            self._local.cost = worker.cost
            self._give(worker)
        if reply[0] == "error":
            raise ToolError(reply[1])
        return reply[1], reply[2], reply[3]

    def last_cost(self) -> QueryCost | None:
        """What this thread's last query cost its worker."""
        return getattr(self._local, "cost", None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers, self._idle = list(self._all), []
            self._all.clear()
        for worker in workers:
            worker.kill()

    def _take(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise ToolError("the database was closed: call again")
            if self._idle:
                return self._idle.pop()
        worker = _Worker.start(self.path, self.limits)
        with self._lock:
            self._all.add(worker)
        return worker

    def _give(self, worker: _Worker) -> None:
        with self._lock:
            if self._closed:
                self._all.discard(worker)
            else:
                self._idle.append(worker)
                return
        worker.kill()

    def _drop(self, worker: _Worker) -> None:
        with self._lock:
            self._all.discard(worker)


def _stop_all(workers: set[_Worker]) -> None:
    for worker in list(workers):
        worker.kill()


class _Gone(Exception):
    """The worker did not answer: it ran past its time (``timed_out``) or died (its memory cap)."""

    def __init__(self, timed_out: bool) -> None:
        super().__init__("timed out" if timed_out else "died")
        self.timed_out = timed_out


class _Worker:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.cost = QueryCost(0.0, 0)
        self._cpu = 0.0  # the worker's CPU seconds when its last query ended

    @classmethod
    def start(cls, path: Path, limits: Limits) -> _Worker:
        args = [sys.executable, "-m", "retriever.agent.tools.sqlchild", str(path), str(limits.sql_memory_mb)]
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        worker = cls(proc)
        try:
            ready = worker._receive(time.monotonic() + START_SECONDS)
        except _Gone:
            worker.kill()
            raise ToolError(
                "the SQL worker did not start: check the bundle's okf.duckdb with `vault2okf doctor`"
            ) from None
        if ready[0] != "ready":
            worker.kill()
            raise ToolError(str(ready[1]))
        return worker

    def ask(self, query: str, limits: Limits) -> Any:
        assert self.proc.stdin is not None
        data = pickle.dumps((query, limits))
        try:
            self.proc.stdin.write(len(data).to_bytes(_HEADER, "little") + data)
            self.proc.stdin.flush()
        except OSError:
            raise _Gone(timed_out=False) from None
        reply = self._receive(time.monotonic() + limits.sql_seconds + GRACE)
        cpu, peak = reply[-1]
        self.cost = QueryCost(cpu - self._cpu, peak)
        self._cpu = cpu
        return reply[:-1]

    def kill(self) -> QueryCost:
        """Stop the worker; what it cost since its last answer, from the kernel's account of it."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            _, _, usage = os.wait4(self.proc.pid, 0)
        except ChildProcessError:  # already reaped by poll(): its account is gone with it
            return QueryCost(0.0, 0, killed=True)
        finally:
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()
        cpu = usage.ru_utime + usage.ru_stime
        self.proc.returncode = self.proc.returncode if self.proc.returncode is not None else -9
        return QueryCost(cpu - self._cpu, usage.ru_maxrss * 1024, killed=True)

    def _receive(self, deadline: float) -> Any:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        size = int.from_bytes(_read(fd, _HEADER, deadline), "little")
        return pickle.loads(_read(fd, size, deadline))


def _read(fd: int, n: int, deadline: float) -> bytes:
    """``n`` bytes from ``fd`` by ``deadline``; _Gone when the time is up or the pipe closed first."""
    parts: list[bytes] = []
    while n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise _Gone(timed_out=True)
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise _Gone(timed_out=False)
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


# --- the worker's side -------------------------------------------------------------------------------------------


def _cap_memory(megabytes: int) -> None:
    """The address space the worker has now (Python, DuckDB, the attached file) plus ``megabytes``."""
    with open(f"/proc/{os.getpid()}/statm") as fh:
        now = int(fh.read().split()[0]) * resource.getpagesize()
    cap = now + (megabytes << 20)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _send(out: Any, value: Any) -> None:
    data = pickle.dumps(value)
    out.write(len(data).to_bytes(_HEADER, "little") + data)
    out.flush()


def _receive_request(inp: Any) -> Any:
    head = inp.read(_HEADER)
    if len(head) < _HEADER:
        return None
    return pickle.loads(inp.read(int.from_bytes(head, "little")))


def _spent() -> tuple[float, int]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024
