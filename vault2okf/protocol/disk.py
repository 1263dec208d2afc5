"""The one way a full disk is told, shared by the two writers of a bundle (``convert`` and ``index``)."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path


def is_disk_full(error: BaseException) -> bool:
    """An OSError ENOSPC/EDQUOT anywhere in the chain, or a library's own words for it (SQLite, chromadb)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(seen).lower()
        if "no space left" in text or "disk is full" in text or "disk full" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def existing(path: Path) -> Path:
    """``path``, or the nearest folder above it that exists: where its file system can be asked about it."""
    return next((p for p in (path, *path.parents) if p.exists()), path)


def free_space(path: Path) -> int | None:
    """Free bytes on the file system that holds (or would hold) ``path``; None when it cannot be asked."""
    try:
        return shutil.disk_usage(existing(path)).free
    except OSError:
        return None


def disk_full_message(path: Path, need: int, what: str) -> str:
    """One line: where the disk is full, how much is free there, about how much ``what`` needs."""
    free = free_space(path) or 0
    return (
        f"no space left on the device of {path} ({_size(free)} free): {what} needs about {_size(need)} there; "
        "free some space and run it again (nothing written before is lost)"
    )


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"
