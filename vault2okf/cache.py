"""The convert cache: what the last convert of a bundle read and made, note by note, so that the next convert
redoes only what changed (docs/ARCHITECTURE.md, "Incremental convert").

It lives in the bundle's state folder (``.vault2okf/convert-cache.pickle``), is written into the staging tree
with the rest of the bundle and swapped in with it, so it always describes the bundle beside it. It is only a
cache: a missing, stale or unreadable one means a full convert, never an error. Its key covers the config, the
vault's place and the code of vault2okf itself, so a new version of the tool never trusts an old cache.

A file is taken as unchanged without being read when its size, mtime, ctime and inode are the ones recorded,
unless it was modified within ``RACY_NS`` of the run that recorded it (a write in the same clock tick as that
read would keep the mtime): such a file is read and its content hash compared, as git does with its index.
A generated file of the old bundle is reused (hard-linked into the new one) only while its size, mtime and
inode are the ones recorded when it was written: an edited or deleted bundle file is made again.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import stat
from dataclasses import asdict, dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from vault2okf import bundle as b
from vault2okf.bundle import Doc
from vault2okf.config import Config
from vault2okf.meta import Meta
from vault2okf.parse import Link, Problem
from vault2okf.report import LinkReport
from vault2okf.resolve import Resolution
from vault2okf.suggest import BodyWords
from vault2okf.walk import VaultFile, Walk

NAME = "convert-cache.pickle"
FORMAT = 1
RACY_NS = 2_000_000_000


@dataclass
class NoteState:
    """One note as the last convert saw it: each step's result and the problems it reported."""

    sig: tuple[int, ...]  # VaultFile.sig of the file that was read
    content: str | None  # sha256 of its bytes ("big: ..." for a note over the size limit; None: never reused)
    read_problems: tuple[Problem, ...]
    parse_problems: tuple[Problem, ...]  # Note.problems
    links: tuple[Link, ...]
    words: BodyWords
    mtime: float
    base: str
    meta: Meta
    meta_problems: tuple[Problem, ...]
    resolved: tuple[Resolution, ...]  # one per link
    resolve_problems: tuple[Problem, ...]
    inputs: tuple[Any, ...]  # what the rewrite read besides the note: its doc path, each link's target doc path
    rewrite_problems: tuple[Problem, ...]
    doc_problems: tuple[Problem, ...]
    doc: Doc  # without its text, which is in the bundle
    output: tuple[int, ...]  # output_sig of concepts/<doc_path> as written


@dataclass
class ConvertCache:
    key: str
    started_ns: int  # when the run that wrote it began
    walk: str  # walk_digest of the vault it converted
    universe: str  # universe_digest: everything a link resolves against
    notes: dict[str, NoteState]
    attachments: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]  # path -> (source sig, output_sig of the copy)
    files: dict[str, tuple[int, ...]]  # every other file of the bundle (okf.duckdb included) -> output_sig
    report: LinkReport

    def unchanged(self, walk: Walk, out: Path) -> bool:
        """Is the vault as this cache saw it (no file read, only stat), and the bundle at ``out`` as written?"""
        if walk_digest(walk) != self.walk:
            return False
        if not all(self._same_content(f) for f in walk.notes if self.racy(f)):
            return False
        outputs = {**self.files, **{f"{b.CONCEPTS}/{s.doc.doc_path}": s.output for s in self.notes.values()}}
        outputs.update((f"{b.CONCEPTS}/{path}", copy) for path, (_, copy) in self.attachments.items())
        root = str(out)
        return all(output_sig(os.path.join(root, rel)) == sig for rel, sig in outputs.items())

    def _same_content(self, file: VaultFile) -> bool:
        """A file whose signature cannot be trusted (``racy``): is its content the one recorded?"""
        state = self.notes.get(file.path)
        if state is None or state.content is None:
            return False
        if state.content.startswith("big: "):  # over the size limit: only its size was read, and it is the same
            return True
        try:
            with open(file.abs_path, "rb") as fh:
                return hashlib.sha256(fh.read()).hexdigest() == state.content
        except OSError:
            return False

    def racy(self, file: VaultFile) -> bool:
        return len(file.sig) < 2 or file.sig[1] >= self.started_ns - RACY_NS


def output_sig(path: str | Path) -> tuple[int, ...]:
    """(size, mtime_ns, inode) of a file the bundle holds; () when it is missing or not a regular file."""
    try:
        info = os.lstat(path)
    except OSError:
        return ()
    return (info.st_size, info.st_mtime_ns, info.st_ino) if stat.S_ISREG(info.st_mode) else ()


def walk_digest(walk: Walk) -> str:
    """Every file the walk found with its signature, and what it skipped, excluded and reported."""
    h = hashlib.sha256()
    for f in (*walk.notes, *walk.attachments):
        h.update(f"{f.path}\0{f.sig}\0{f.mtime!r}\n".encode("utf-8", "surrogatepass"))
    h.update(repr((walk.skipped, walk.excluded, walk.problems)).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def universe_digest(walk: Walk, aliases: dict[str, tuple[str, ...]]) -> str:
    """What a link resolves against besides the config: the notes, attachments, excluded files and aliases."""
    data = (
        [f.path for f in walk.notes],
        [f.path for f in walk.attachments],
        list(walk.excluded),
        sorted(aliases.items()),
    )
    return hashlib.sha256(repr(data).encode("utf-8", "surrogatepass")).hexdigest()


def cache_key(vault: Path, vault_name: str, config: Config) -> str:
    """The config (less ``base``, which each note's state records), the vault's place and name, the code."""
    fields = asdict(config)
    fields.pop("base", None)
    text = json.dumps([FORMAT, str(vault), vault_name, fields, code_digest()], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@cache
def code_digest() -> str:
    """A digest of vault2okf's own source and defaults: a cache written by other code is never trusted."""
    h = hashlib.sha256()
    root = files("vault2okf")
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith((".py", ".toml")):
            h.update(entry.name.encode())
            h.update(entry.read_bytes())
    return h.hexdigest()


def cache_path(bundle: Path) -> Path:
    return bundle / b.STATE / NAME


def load(bundle: Path, key: str) -> ConvertCache | None:
    """The bundle's cache when it was written for ``key``; None when missing, stale or unreadable."""
    try:
        with open(cache_path(bundle), "rb") as fh:
            found = pickle.load(fh)  # noqa: S301 - our own file, in the output the user chose
    except Exception:  # noqa: BLE001 - a cache that cannot be read is no cache
        return None
    return found if isinstance(found, ConvertCache) and found.key == key else None


def save(stage: Path, found: ConvertCache) -> None:
    """Write the cache into the staging tree (swapped in with the bundle it describes)."""
    path = cache_path(stage)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump(found, fh, protocol=pickle.HIGHEST_PROTOCOL)
