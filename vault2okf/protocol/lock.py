"""The bundle lock: one `vault2okf convert` (or `watch` rebuild) or `vault2okf index` at a time per bundle.

The lock is a file beside the bundle, ``PARENT/.NAME.lock``, held with ``fcntl.flock`` for the whole run and
released by the kernel when the process ends, however it ends (kill -9 included). It lives beside the bundle,
not inside it, because `convert` swaps the bundle folder. The file says who holds it: ``PID converting|indexing``.
This module is the one implementation: `vault2okf.bundle` takes it for convert, `retriever.lock` for index, each
raising its own package's error.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vault2okf.protocol import BundleError


def lock_path(bundle: Path | str) -> Path:
    """``PARENT/.NAME.lock``: the lock file of ``bundle``, beside it."""
    resolved = Path(bundle).resolve()
    return resolved.parent / f".{resolved.name}.lock"


@contextmanager
def bundle_lock(bundle: Path | str, doing: str, *, error: type[Exception] = BundleError) -> Iterator[None]:
    """Hold the bundle's lock while ``doing`` (``converting``, ``indexing``); ``error`` at once, naming the other
    run and its pid, when another run holds it."""
    path = lock_path(bundle)
    fd = _acquire(path, bundle, error)
    try:
        os.ftruncate(fd, 0)  # a run killed while holding it left its pid there
        os.write(fd, f"{os.getpid()} {doing}\n".encode())
        yield
    finally:
        os.unlink(path)  # while still held: a run that opened this file meanwhile sees it is gone and retries
        os.close(fd)


def _acquire(path: Path, bundle: Path | str, error: type[Exception]) -> int:
    """The locked file descriptor of the lock file at ``path`` (the file that is there now, not a removed one)."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise error(f"Cannot create the lock file {path} ({e.strerror}): is its folder writable?") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            message = _held_message(fd, bundle)
            os.close(fd)
            raise error(message) from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # the holder removed the file as we opened it: take the new one


def holder(bundle: Path | str) -> tuple[str, str] | None:
    """``(pid, doing)`` of the run holding the bundle's lock now, or None; takes nothing (a search asks this)."""
    try:
        fd = os.open(lock_path(bundle), os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        pid, _, doing = _holder_text(fd).partition(" ")
        return pid or "?", doing or "using"
    except OSError:
        return None
    finally:
        os.close(fd)  # also releases a lock it took
    return None


def _holder_text(fd: int) -> str:
    """The lock file's ``PID doing``; the holder writes it just after it takes the lock, so an empty file is
    read again for a moment."""
    text = ""
    for _ in range(50):
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
        if text:
            break
        time.sleep(0.01)
    return text


def _held_message(fd: int, bundle: Path | str) -> str:
    """Who holds the lock, from its file ("using" and "pid ?" when it stays empty)."""
    pid, _, doing = _holder_text(fd).partition(" ")
    return (
        f"another vault2okf is {doing or 'using'} {bundle} (pid {pid or '?'}): wait for it to finish, "
        "or stop it and run this again."
    )


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (one of another user's counts: it cannot be signalled, but it exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
