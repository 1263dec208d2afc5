"""Per-note steps of ``convert`` that never raise: one bad note becomes a report entry and the run goes on.

Each step catches what it knows (a file that is not regular, a note over the size limit) and, as a last
resort, any unexpected exception, which is reported with the note's path as a bug to file. The note is
still listed: with an empty body when it could not be read or parsed, with its text as written when its
links could not be rewritten.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vault2okf.config import Config
from vault2okf.meta import Meta, note_meta, note_type, timestamp
from vault2okf.parse import Link, Note, Problem, parse_note, too_big_note
from vault2okf.resolve import Resolution, Resolver, Status
from vault2okf.rewrite import rewrite_body
from vault2okf.walk import VaultFile

Problems = list[tuple[str, Problem]]
_BUG = "please report this as a bug with the note attached"


@dataclass(frozen=True)
class NoteFile:
    """A note's file as read: its bytes, or the ``Note`` it is listed as without being parsed (over
    ``config.max_note_bytes``, or unreadable: then with the problem reading it found)."""

    path: str
    data: bytes = b""
    listed: Note | None = None
    problems: tuple[Problem, ...] = ()

    @property
    def content(self) -> str | None:
        """What a convert cache keys the note by: its bytes' sha256, ``big: ...`` for a note listed for its size;
        None for one that could not be read (never reused)."""
        if self.problems:
            return None
        if self.listed is not None:
            return "big: " + "; ".join(p.message for p in self.listed.problems)
        return hashlib.sha256(self.data).hexdigest()

    def parse(self, problems: Problems) -> Note:
        """The parsed note (the listed one when it was not read as text)."""
        return self.listed if self.listed is not None else parse_safe(self.path, self.data, problems)


def read_note(file: VaultFile, config: Config) -> NoteFile:
    """The one reader of a note's file: its bytes, or, over ``config.max_note_bytes`` or unreadable, the
    ``Note`` it is listed as."""
    limit = config.max_note_bytes
    if file.size > limit:
        return NoteFile(file.path, listed=too_big_note(file.path, file.size, limit))
    try:
        data = _read_regular(file.abs, limit)
    except OSError as exc:
        problem = Problem("error", f"cannot be read ({exc.strerror or exc}); listed without its body")
        return NoteFile(file.path, listed=_empty_note(file.path), problems=(problem,))
    if len(data) > limit:
        return NoteFile(file.path, listed=too_big_note(file.path, len(data), limit))
    return NoteFile(file.path, data)


def parse_safe(path: str, data: bytes, problems: Problems) -> Note:
    try:
        return parse_note(path, data)
    except Exception as exc:  # noqa: BLE001 - one bad note never stops a run
        return _empty(path, problems, f"could not be parsed ({_name(exc)}); listed without its body; {_BUG}")


def _read_regular(path: str, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes of a regular file; never blocks on a named pipe that replaced it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError(f"{os.path.basename(path)} is not a regular file")
        return fh.read(limit + 1)


def _empty(path: str, problems: Problems, message: str) -> Note:
    problems.append((path, Problem("error", message)))
    return _empty_note(path)


def _empty_note(path: str) -> Note:
    return Note(path, {}, None, None, "", 1, ())


def note_meta_safe(note: Note, mtime: float, config: Config, problems: Problems) -> Meta:
    try:
        meta = note_meta(note.path, note.frontmatter, note.body, mtime, config, note.code)
    except Exception as exc:  # noqa: BLE001
        message = f"fields could not be read ({_name(exc)}); defaults used; {_BUG}"
        problems.append((note.path, Problem("error", message)))
        stem = posixpath.basename(note.path)[:-3] or "Untitled"
        return Meta(note_type(note.path, {}, config), stem, "", timestamp({}, mtime), (), (), None, None)
    problems.extend((note.path, p) for p in meta.problems)
    return meta


def resolve_links_safe(
    resolver: Resolver, path: str, links: Sequence[Link], problems: Problems
) -> list[tuple[Link, Resolution]]:
    try:
        return [(link, resolver.resolve(link.target, path)) for link in links]
    except Exception as exc:  # noqa: BLE001
        problems.append((path, Problem("error", f"links could not be resolved ({_name(exc)}); {_BUG}")))
        return [(link, Resolution(Status.BROKEN, None)) for link in links]


def rewrite_safe(note: Note, resolved: Mapping[Link, Resolution], doc_of: Mapping[str, str], problems: Problems) -> str:
    try:
        return rewrite_body(note, resolved, doc_of)
    except Exception as exc:  # noqa: BLE001
        message = f"links could not be rewritten ({_name(exc)}); the body is kept as written; {_BUG}"
        problems.append((note.path, Problem("error", message)))
        return note.body


def _name(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]
