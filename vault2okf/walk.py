"""Walk a vault: notes (``*.md``) and attachments (other files), skipping what Obsidian and the user hide.

Only regular files are read: named pipes, sockets, devices, symlink loops and symlinks that leave the vault
are skipped and listed. A file name that is not valid UTF-8 is converted under a safe name (each bad byte
becomes U+FFFD) and reported; two names that are the same after Unicode normalisation (NFC) are one vault
path, so only the first (by the bytes of its name) is converted and the other is skipped and listed.
"""

from __future__ import annotations

import datetime as dt
import errno
import fnmatch
import os
import posixpath
import re
import stat
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from vault2okf.errors import Vault2OkfError
from vault2okf.parse import Problem

SKIPPED_DIRS = frozenset({".obsidian", ".trash", ".git"})
MIN_MTIME = dt.datetime(1, 1, 2, tzinfo=dt.UTC).timestamp()  # a day of margin for any local-time conversion
MAX_MTIME = dt.datetime(9999, 12, 30, tzinfo=dt.UTC).timestamp()
_EXCLUDED = "excluded by config [walk] exclude"
_TWIN = "same name as"
_FOLDER_LINK = "symlink to a folder; folder links are never followed (no loops, no escapes)"
_FUTURE_SLACK = 86_400  # a clock a day ahead is not worth a report line


@dataclass(frozen=True)
class VaultFile:
    path: str  # vault-relative, "/" separators, NFC, valid UTF-8
    abs: str  # the file's absolute path, as the disk spells it
    size: int = 0
    mtime: float = 0.0  # seconds since the epoch, within the range datetime can hold
    sig: tuple[int, ...] = ()  # (size, mtime_ns, ctime_ns, inode): the convert cache's "unchanged" test

    @property
    def abs_path(self) -> Path:
        return Path(self.abs)


@dataclass(frozen=True)
class Walk:
    notes: tuple[VaultFile, ...]
    attachments: tuple[VaultFile, ...]
    skipped: tuple[tuple[str, str], ...]  # (path, reason)
    problems: tuple[tuple[str, Problem], ...] = ()  # (path, problem) for files that are converted anyway
    excluded: tuple[str, ...] = ()  # vault paths of files under excluded folders (named only, never read)


def walk_vault(root: Path, exclude: tuple[str, ...] = ()) -> Walk:
    return Walked(root, exclude).walk


@dataclass(frozen=True)
class _Entry:
    """What the walk made of one file of a folder it entered: converted (``file``) or skipped (``reason``)."""

    path: str
    file: VaultFile | None
    reason: str  # "" for a file converted
    problems: tuple[Problem, ...]
    link: bool = False  # a symlink (its target may change with no event on its own path)


PATCH_MOST = 512  # changed paths beyond which a patch is not worth it (a sync, a checkout): the whole walk again


class Walked:
    """A walk of the vault, kept so that the next one can be this one patched with the paths that changed
    (``patch``, a watcher's: it knows them from its file events) rather than made again from the whole disk.

    Each file of a folder the walk entered is kept by its path as the disk spells it, with what the walk made of
    it; ``walk`` is made from them by the same code either way, so a patched walk is the one a whole walk gives
    for the same disk. A patch declines (returns None; walk again) where one path's new state could change what
    the walk says of other paths: a folder that appeared, went or is named, a file in a folder the walk did not
    enter (hidden, excluded: those are listed from the folder), or a walk holding a symlink (its target changes
    with no event on the link), two names that are one after Unicode normalisation, or a problem (an mtime in
    the future stops being one as time passes)."""

    def __init__(self, root: Path, exclude: tuple[str, ...] = ()) -> None:
        if not root.is_dir():
            raise Vault2OkfError(f"vault not found: {root} is not a folder")
        self.root, self.exclude = root.resolve(), exclude
        self.entries: dict[str, _Entry] = {}  # path as the disk spells it -> what the walk made of it
        self.found: dict[str, VaultFile] = {}  # vault path -> the file converted under it
        self.folders: set[str] = set()  # the folders the walk entered, as the disk spells them ("" the vault)
        self.folder_skips: list[tuple[str, str]] = []  # ("path/", reason) of the folders it did not enter
        now = time.time()
        for dirpath, raw_dir, filenames in _folders(str(self.root), exclude, self.folder_skips):
            self.folders.add("" if raw_dir == "." else raw_dir)
            for name in sorted(filenames, key=_name_order):
                raw = name if raw_dir == "." else f"{raw_dir}/{name}"
                self._add(raw, _entry(os.path.join(dirpath, name), raw, name, self.root, exclude, now, self.found))
        self.under: list[str] = []  # the files under excluded folders (named only)
        for folder, reason in self.folder_skips:
            if reason == _EXCLUDED and folder.endswith("/"):
                self.under.extend(_names_under(self.root, folder))
        self.exact = not any(e.link or e.problems or e.reason.startswith(_TWIN) for e in self.entries.values())
        self.exact &= not any(reason == _FOLDER_LINK for _, reason in self.folder_skips)
        self.walk = self._made()

    def _add(self, raw: str, entry: _Entry) -> None:
        self.entries[raw] = entry
        if entry.file is not None:
            self.found[entry.path] = entry.file

    def _made(self) -> Walk:
        files = sorted(self.found.values(), key=_key)
        entries = self.entries.values()
        skipped = [(e.path, e.reason) for e in entries if e.reason]
        problems = sorted(((e.path, p) for e in entries for p in e.problems), key=lambda p: p[0])
        excluded = [e.path for e in entries if e.reason == _EXCLUDED]
        return Walk(
            notes=tuple(f for f in files if _is_note(f.path)),
            attachments=tuple(f for f in files if not _is_note(f.path)),
            skipped=tuple(sorted([*skipped, *self.folder_skips])),
            problems=tuple(problems),
            excluded=tuple(sorted({*excluded, *self.under})),
        )

    def patch(self, changed: Iterable[str]) -> Walk | None:
        """The walk again, only the files at ``changed`` (absolute paths, as file events name them) looked at
        again; None where that cannot be known so (see the class), and then this object is spent: walk again."""
        paths = set(changed)
        if not self.exact or len(paths) > PATCH_MOST:
            return self._spent()
        top = str(self.root) + os.sep
        now = time.time()
        for abs_path in sorted(paths):
            if not abs_path.startswith(top):
                return self._spent()
            raw = abs_path[len(top) :].replace(os.sep, "/")
            folder, name = posixpath.split(raw)
            if folder not in self.folders or raw in self.folders or _named_folder(raw, self.folder_skips):
                return self._spent()  # a folder, or a file of one the walk did not enter
            try:
                info = os.lstat(abs_path)
            except FileNotFoundError:
                info = None
            except OSError:
                return self._spent()
            if info is not None and (stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                return self._spent()
            was = self.entries.pop(raw, None)
            if was is not None and was.file is not None:
                del self.found[was.path]
            if info is None:
                continue
            entry = _entry(abs_path, raw, name, self.root, self.exclude, now, self.found)
            if entry.problems or entry.reason.startswith(_TWIN) or entry.link:
                return self._spent()
            self._add(raw, entry)
        self.walk = self._made()
        return self.walk

    def _spent(self) -> Walk | None:
        """None, and this walk is never patched again."""
        self.exact = False
        return None


def _named_folder(raw: str, folder_skips: list[tuple[str, str]]) -> bool:
    """Is ``raw`` a folder the walk listed as skipped (excluded, a link)? Named by its vault path and a ``/``."""
    key = unicodedata.normalize("NFC", safe_name(raw)) + "/"
    return any(path == key for path, _ in folder_skips)


def _entry(
    abs_path: str, raw: str, name: str, root: Path, exclude: tuple[str, ...], now: float, found: dict[str, VaultFile]
) -> _Entry:
    """What the walk makes of the file ``raw`` (its path as the disk spells it) of a folder it entered; ``found``:
    the files converted so far by vault path (of two names that are one after normalisation, the first wins)."""
    path = unicodedata.normalize("NFC", safe_name(raw))
    reason, info, link = _skip_file(abs_path, root, name, path, exclude)
    if not reason and path in found:
        reason = f"{_TWIN} {found[path].abs_path.name!a} after Unicode normalisation (NFC); rename one"
    if reason or info is None:
        return _Entry(path, None, reason, (), link)
    problems: list[Problem] = []
    if path != raw and safe_name(raw) != raw:
        message = f"file name {_shown(raw)} is not valid UTF-8; converted as {path}. Rename it"
        problems.append(Problem("name", message))
    mtime, problem = check_mtime(info.st_mtime, now)
    if problem:
        problems.append(problem)
    sig = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
    return _Entry(path, VaultFile(path, abs_path, info.st_size, mtime, sig), "", tuple(problems), link)


def _folders(
    root: str, exclude: tuple[str, ...], skipped: list[tuple[str, str]]
) -> Iterator[tuple[str, str, list[str]]]:
    """The folders to convert, as ``os.walk`` visits them top-down (each folder, then its kept subfolders in
    name order): (absolute path, path from the vault as the disk spells it, file names).

    Strings and ``os.scandir`` only: a vault of thousands of notes is walked on every convert, nothing changed
    included. A folder that cannot be listed is passed over, as ``os.walk`` does."""
    stack = [(root, "", ".")]
    while stack:
        dirpath, rel_dir, raw_dir = stack.pop()
        dirs: list[tuple[str, bool]] = []
        filenames: list[str] = []
        try:
            with os.scandir(dirpath) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    if is_dir:
                        try:
                            link = entry.is_symlink()
                        except OSError:  # as os.path.islink: a link that cannot be read is not one
                            link = False
                        dirs.append((entry.name, link))
                    else:
                        filenames.append(entry.name)
        except OSError:
            continue
        dirs.sort()
        kept = [(d, link) for d, link in dirs if _keep_dir(rel_dir, d, link, exclude, skipped)]
        yield dirpath, raw_dir, filenames
        for d, _ in reversed(kept):
            child = unicodedata.normalize("NFC", f"{rel_dir}/{safe_name(d)}" if rel_dir else safe_name(d))
            stack.append((os.path.join(dirpath, d), child, d if raw_dir == "." else f"{raw_dir}/{d}"))


def _names_under(root: Path, folder: str) -> list[str]:
    """Vault paths of the files under an excluded folder: named, so links to them are ``excluded``, never read."""
    names = []
    for dirpath, dirnames, filenames in os.walk(root / folder, followlinks=False):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        names += [unicodedata.normalize("NFC", safe_name(f"{rel}/{n}")) for n in filenames if not n.startswith(".")]
    return names


def safe_name(name: str) -> str:
    """A name from the file system as valid UTF-8: undecodable bytes (surrogate escapes) become U+FFFD."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "replace")
    return name


def _shown(raw: str) -> str:
    """A name with undecodable bytes as Python writes bytes: ``b'caf\\xe9.md'``."""
    return repr(os.fsencode(raw))


def check_mtime(mtime: float, now: float) -> tuple[float, Problem | None]:
    """The mtime clamped into the range a timestamp can hold, and a problem when it is out of range or odd."""
    if 0 <= mtime <= now + _FUTURE_SLACK:
        return mtime, None
    when = _iso(mtime)
    if not MIN_MTIME <= mtime <= MAX_MTIME:
        clamped = min(max(mtime, MIN_MTIME), MAX_MTIME)
        return clamped, Problem("mtime", f"file modification time {mtime:.0f} s is out of range; used {_iso(clamped)}")
    if mtime > now + _FUTURE_SLACK:
        return mtime, Problem("mtime", f"file modification time {when} is in the future; fix it with `touch`")
    if mtime < 0:
        return mtime, Problem("mtime", f"file modification time {when} is before 1970; fix it with `touch`")
    return mtime, None


def _iso(mtime: float) -> str:
    if not MIN_MTIME <= mtime <= MAX_MTIME:
        return f"{mtime:.0f} s"
    return dt.datetime.fromtimestamp(int(mtime), tz=dt.UTC).isoformat()


def _name_order(name: str) -> tuple[bool, bytes]:
    """NFC names first, then by bytes: of two NFC twins the canonical spelling is the one converted."""
    return unicodedata.normalize("NFC", name) != name, os.fsencode(name)


def _is_note(path: str) -> bool:
    return path.lower().endswith(".md")


def _key(f: VaultFile) -> str:
    return f.path


def _keep_dir(rel_dir: str, name: str, is_link: bool, exclude: tuple[str, ...], skipped: list[tuple[str, str]]) -> bool:
    path = unicodedata.normalize("NFC", f"{rel_dir}/{safe_name(name)}" if rel_dir else safe_name(name))
    if name in SKIPPED_DIRS or name.startswith("."):
        return False
    if is_excluded(path, name, exclude):
        skipped.append((path + "/", _EXCLUDED))
        return False
    if is_link:  # not descended into; said so instead of dropped silently
        skipped.append((path + "/", _FOLDER_LINK))
        return False
    return True


def _skip_file(
    abs_path: str, root: Path, name: str, path: str, exclude: tuple[str, ...]
) -> tuple[str, os.stat_result | None, bool]:
    """(reason to skip or "", the file's stat when it is a regular file to convert, whether it is a symlink)."""
    if name.startswith(".") and name != ".md":
        return "hidden file", None, False
    if is_excluded(path, name, exclude):
        return _EXCLUDED, None, False
    link = False
    try:
        info = os.lstat(abs_path)  # one system call for a regular file
        if stat.S_ISLNK(info.st_mode):
            link = True
            target = Path(os.path.realpath(abs_path, strict=True))
            if not target.is_relative_to(root):
                return f"symlink pointing outside the vault ({safe_name(str(target))})", None, link
            info = os.stat(abs_path)
    except (OSError, RuntimeError) as exc:  # a symlink loop, a dangling symlink, a file gone meanwhile
        return f"cannot be read: {_os_reason(exc)}", None, link
    if not stat.S_ISREG(info.st_mode):
        return f"not a regular file ({_kind(info.st_mode)}); only regular files are converted", None, link
    return "", info, link


def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
        return "a symlink loop; fix or remove the link"
    if isinstance(exc, OSError) and exc.errno == errno.ENOENT:
        return "a symlink to nothing; fix or remove the link"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc)


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return kind
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file"


def is_excluded(path: str, name: str, exclude: Sequence[str]) -> bool:
    """Is the folder or file ``path`` (named ``name``) excluded by ``[walk] exclude``? It is when a pattern is its
    path (slashes at either end ignored), its name, or a glob (``fnmatch``, case-sensitive) matching its path."""
    return bool(exclude) and _matcher(tuple(exclude))(path, name)


@lru_cache(maxsize=32)
def _matcher(exclude: tuple[str, ...]) -> Callable[[str, str], bool]:
    """``is_excluded`` for one list of patterns, made once: a walk asks it of every file and folder, and a glob
    at a time through ``fnmatch`` cost a vault of 7,000 files a third of a convert that finds nothing changed."""
    paths = frozenset(e.strip("/") for e in exclude)
    names = frozenset(exclude)
    globs = re.compile("|".join(fnmatch.translate(e) for e in exclude)).match

    def excluded(path: str, name: str) -> bool:
        return path in paths or name in names or globs(path) is not None

    return excluded
