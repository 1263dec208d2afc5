"""Per-note steps of ``convert`` that never raise: one bad note becomes a report entry and the run goes on.

Each step catches what it knows (a file that is not regular, a note over the size limit) and, as a last
resort, any unexpected exception, which is reported with the note's path as a bug to file. The note is
still listed: with an empty body when it could not be read or parsed, with its text as written when its
links could not be rewritten.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Mapping, Sequence

from vault2okf.config import Config
from vault2okf.meta import Meta, note_meta, note_type, timestamp
from vault2okf.parse import Link, Note, Problem, parse_note, too_big_note
from vault2okf.resolve import Resolution, Resolver, Status
from vault2okf.rewrite import rewrite_body
from vault2okf.walk import VaultFile

Problems = list[tuple[str, Problem]]
_BUG = "please report this as a bug with the note attached"


def read_note(file: VaultFile, config: Config, problems: Problems) -> Note:
    """The parsed note; a note over ``config.max_note_bytes`` is listed, not parsed."""
    data = read_bytes(file, config, problems)
    return data if isinstance(data, Note) else parse_safe(file.path, data, problems)


def read_bytes(file: VaultFile, config: Config, problems: Problems) -> bytes | Note:
    """The note's bytes; or, for a note over ``config.max_note_bytes`` or one that cannot be read, its Note."""
    limit = config.max_note_bytes
    if file.size > limit:
        return too_big_note(file.path, file.size, limit)
    try:
        data = _read_regular(file.abs, limit)
    except OSError as exc:
        return _empty(file.path, problems, f"cannot be read ({exc.strerror or exc}); listed without its body")
    if len(data) > limit:
        return too_big_note(file.path, len(data), limit)
    return data


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


def resolve_note(resolver: Resolver, note: Note, problems: Problems) -> list[tuple[Link, Resolution]]:
    return resolve_links_safe(resolver, note.path, note.links, problems)


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
