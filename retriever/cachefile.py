"""The search path's caches on disk (``.vault2okf/graph-cache.json``, ``table-*.npz``, ``lexical-*.npz``,
``contexts-*.npz``): each file proves its body, as the convert cache does (``vault2okf/cache.py``).

A cache file is a magic line naming what it is and its format, a head (one line of JSON: what the cache was made
from, the body's length and sha256) and the body. It is opened without following it into a pipe or a device
(``O_NONBLOCK``, then ``fstat``: only a regular file is read) and read only under a size bound, so a FIFO, a
symlink to ``/dev/zero`` or a folder in its place is damage, never a hang or a memory blow-up. A reader treats
``CacheDamaged`` as one ``note:`` line, a rebuild from the bundle and a rewrite.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

MIN_LIMIT = 64 << 20  # bytes any cache may hold, however small its bundle's database
HEAD_LIMIT = 1 << 16  # bytes `read_head` reads for a head


class CacheDamaged(Exception):
    """A cache file that is not what this code wrote (truncated, edited, a special file, too large): rebuild it."""


def size_limit(bundle: Path) -> int:
    """The most bytes a cache of ``bundle`` may hold: every cache is made from ``okf.duckdb`` and the chunk
    table (texts and vectors of the same notes), so a generous multiple of the database's size, never less than
    ``MIN_LIMIT``."""
    try:
        size = (bundle / "okf.duckdb").stat().st_size
    except OSError:
        size = 0
    return max(MIN_LIMIT, 16 * size)


def read_cache(path: Path, magic: bytes, limit: int) -> tuple[dict[str, Any], bytes] | None:
    """The head and the body of the cache at ``path``; None when there is no file; ``CacheDamaged`` when it is
    not a regular file, is over ``limit`` bytes, or its magic, head or body are not the ones written."""
    data = _read_regular(path, limit)
    if data is None:
        return None
    if not data.startswith(magic):
        raise CacheDamaged(f"{path.name} is not a {magic.decode(errors='replace').strip()}")
    end = data.find(b"\n", len(magic))
    if end < 0:
        raise CacheDamaged(f"{path.name} has no head")
    try:
        head = json.loads(data[len(magic) : end])
    except (ValueError, RecursionError) as error:
        raise CacheDamaged(f"{path.name}: its head is unreadable ({type(error).__name__})") from None
    body = data[end + 1 :]
    if not isinstance(head, dict) or head.get("body_size") != len(body):
        raise CacheDamaged(f"{path.name} is {len(data)} bytes, not the size its head records")
    if head.get("body_sha256") != hashlib.sha256(body).hexdigest():
        raise CacheDamaged(f"{path.name}: its body is not the one written")
    return head, body


def read_head(path: Path, magic: bytes) -> dict[str, Any] | None:
    """The head of the cache at ``path`` without reading or proving its body (what it was made from, to tell
    whether it is current); None when there is none or it is not a cache of ``magic``'s kind."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            start = fh.read(len(magic) + HEAD_LIMIT)
    except OSError:
        return None
    finally:
        os.close(fd)
    end = start.find(b"\n", len(magic))
    if not start.startswith(magic) or end < 0:
        return None
    try:
        head = json.loads(start[len(magic) : end])
    except (ValueError, RecursionError):
        return None
    return head if isinstance(head, dict) else None


def write_cache(path: Path, magic: bytes, head: dict[str, Any], body: bytes) -> None:
    """Write a cache atomically (a temp file beside it, renamed over it: a reader, or a run killed here, sees
    the old file or the new one); OSError when it cannot be written."""
    framed = {**head, "body_size": len(body), "body_sha256": hashlib.sha256(body).hexdigest()}
    line = json.dumps(framed, sort_keys=True, ensure_ascii=True).encode()
    part = path.with_name(f"{path.name}.part-{os.getpid()}")
    try:
        with open(part, "wb") as fh:
            fh.write(magic + line + b"\n")
            fh.write(body)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)


def read_file(path: Path, limit: int) -> bytes | None:
    """The bytes of ``path`` (a regular file of at most ``limit`` bytes), None when there is none; ``CacheDamaged``
    when it is something else."""
    return _read_regular(path, limit)


def _read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes (symlinks to one included);
    opened non-blocking, so a FIFO is seen for what it is before any read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as error:  # a folder (on some systems), a dangling or looping link, no permission
        raise CacheDamaged(f"{path.name} cannot be opened ({error.strerror or error})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CacheDamaged(f"{path.name} is not a regular file")
        if info.st_size > limit:
            raise CacheDamaged(f"{path.name} is {info.st_size} bytes, over the {limit} a cache of this bundle may be")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    except OSError as error:
        raise CacheDamaged(f"{path.name} cannot be read ({error.strerror or error})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise CacheDamaged(f"{path.name} grew past the {limit} bytes a cache of this bundle may be")
    return data


def blob(values: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array and the end offset of each (no pickles, no fixed-width padding)."""
    encoded = [v.encode() for v in values]
    ends = np.cumsum([len(e) for e in encoded], dtype=np.int64) if encoded else np.zeros(0, dtype=np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), ends


def unblob(data: np.ndarray, ends: np.ndarray) -> list[str]:
    """The strings back: a NUL put after each one by numpy, then one decode and one split, both in C (a cold
    search reads some 10^5 BM25 terms; slicing and decoding them one by one cost it 0.1 s). Strings that hold a
    NUL themselves split wrongly, are counted off and take the slow way."""
    ends = np.asarray(ends, dtype=np.int64)
    if not len(ends):
        return []
    marked = np.insert(np.asarray(data, dtype=np.uint8), ends[:-1], 0)
    values = marked.tobytes().decode().split("\x00")
    if len(values) == len(ends):
        return values
    raw = np.asarray(data, dtype=np.uint8).tobytes()
    starts = [0, *ends[:-1].tolist()]
    return [raw[a:b].decode() for a, b in zip(starts, ends.tolist(), strict=True)]
