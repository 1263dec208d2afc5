"""The bundle lock: one `vault2okf convert` or `vault2okf index` at a time per bundle.

The lock is a file beside the bundle, ``PARENT/.NAME.lock``, held with ``fcntl.flock`` for the whole run and
released by the kernel when the process ends, however it ends (kill -9 included). It lives beside the bundle,
not inside it, because `convert` swaps the bundle folder. `vault2okf.bundle` holds the same lock by the same
rule (the two packages share files, not code). The file says who holds it: ``PID converting|indexing``.
"""

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from retriever.errors import RetrieverError

STATE = ".vault2okf"
STATE_ENTRIES = ("chroma", "index.json")


def lock_path(bundle_dir: Path | str) -> Path:
    bundle = Path(bundle_dir).resolve()
    return bundle.parent / f".{bundle.name}.lock"


@contextmanager
def bundle_lock(bundle_dir: Path | str, doing: str) -> Iterator[None]:
    """Hold the bundle's lock while `doing` (``indexing``); RetrieverError at once when another run holds it."""
    path = lock_path(bundle_dir)
    fd = _acquire(path, bundle_dir)
    try:
        os.ftruncate(fd, 0)  # a run killed while holding it left its pid there
        os.write(fd, f"{os.getpid()} {doing}\n".encode())
        yield
    finally:
        os.unlink(path)  # while still held: a run that opened this file meanwhile sees it is gone and retries
        os.close(fd)


def _acquire(path: Path, bundle_dir: Path | str) -> int:
    """The locked file descriptor of the lock file at ``path`` (the file that is there now, not a removed one)."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise RetrieverError(f"Cannot create the lock file {path} ({e.strerror}): is its folder writable?") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            message = _held_message(fd, bundle_dir)
            os.close(fd)
            raise RetrieverError(message) from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # the holder removed the file as we opened it: take the new one


def check_no_stranded_index(bundle_dir: Path | str) -> None:
    """RetrieverError when a killed `vault2okf convert` left this bundle's index beside it (``.NAME.tmp-PID``):
    indexing now would build a second index, while the next convert moves the first one back."""
    bundle = Path(bundle_dir).resolve()
    leftover = re.compile(rf"\.{re.escape(bundle.name)}\.(tmp|old)-\d+")
    siblings = bundle.parent.iterdir() if bundle.parent.is_dir() else iter(())
    for path in sorted(p for p in siblings if leftover.fullmatch(p.name)):
        stranded = [e for e in STATE_ENTRIES if (path / STATE / e).exists() and not (bundle / STATE / e).exists()]
        if stranded:
            raise RetrieverError(
                f"an interrupted `vault2okf convert` left the index of {bundle_dir} in {path}: run the convert "
                "again, which moves it back into the bundle, then index."
            )


def _held_message(fd: int, bundle_dir: Path | str) -> str:
    pid, _, doing = os.pread(fd, 200, 0).decode(errors="replace").strip().partition(" ")
    return (
        f"another vault2okf is {doing or 'using'} {bundle_dir} (pid {pid or '?'}): wait for it to finish, "
        "or stop it and run this again."
    )
