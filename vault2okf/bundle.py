"""Bundle files: concept docs, ``index.md`` per folder, ``SKILL.md``; the lock, the checks and the swap.

Beside the bundle ``PARENT/NAME`` convert uses three kinds of siblings (docs/adr-002-bundle-swap.md):
``.NAME.lock`` (the bundle lock, shared with `vault2okf index`), ``.NAME.tmp-PID`` (the new bundle being
built, then the old one being removed, or a watcher's old one kept to build the next in: ``Spare``;
``.NAME.tmp-PID-NS``: an old generation renamed aside for a thread or a child process to delete) and, only where
the kernel cannot exchange two folders,
``.NAME.old-PID``. Leftovers of a killed run are cleaned up, and the index they hold restored, at the next run.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import marshal
import os
import posixpath
import re
import shutil
import stat
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from vault2okf import frontyaml, mdtext
from vault2okf.errors import Vault2OkfError
from vault2okf.protocol import DATABASE, STATE_DIR, lock
from vault2okf.protocol.lock import lock_path

OKF_VERSION = "0.2"
CONCEPTS = "concepts"
STATE = STATE_DIR
MARKER = f"{STATE}/bundle.json"
LISTING = f"{STATE}/listing.bin"  # the bundle's ``Listing`` as the convert that wrote it saw it (``save_listing``)
_LISTING_MAGIC = b"vault2okf bundle listing 1\n"
RESERVED = frozenset({"index.md", "log.md"})
TOOL = "vault2okf"
LAYOUT = frozenset(
    {"index.md", "SKILL.md", DATABASE, "link-health.md", "link-health.json", "link-health.html", CONCEPTS}
)  # top level
SHOWN = 10  # foreign files named in an error


@dataclass(frozen=True)
class Doc:
    doc_path: str  # relative to concepts/
    title: str
    description: str
    type: str
    text: str  # the whole file: frontmatter + body


def doc_path_for(vault_path: str) -> str:
    """Where a note lands under ``concepts/``: reserved names and a bare ``.md`` are renamed."""
    folder, name = posixpath.split(vault_path)
    if name == ".md":
        name = "_untitled.md"
    elif name.lower() in RESERVED:
        name = f"{name[:-3]} (note).md"
    return posixpath.join(folder, name)


def obsidian_uri(vault_name: str, path: str) -> str:
    """``obsidian://open`` for a note: the vault path without ``.md`` (kept for a note named just ``.md``)."""
    file = path if posixpath.basename(path) == ".md" or not path.lower().endswith(".md") else path[:-3]
    return f"obsidian://open?vault={quote(vault_name, safe='')}&file={quote(file, safe='')}"


def render_doc(frontmatter: Mapping[str, Any], body: str) -> str:
    head = frontyaml.dump(frontmatter)  # yaml.dump's text (CSafeDumper, unsorted, unicode, width 4096)
    return f"---\n{head}---\n{body if body.endswith(chr(10)) or not body else body + chr(10)}"


def folder_indexes(
    docs: Iterable[Doc], title: str, extra_folders: Iterable[str] = (), memo: dict[str, Any] | None = None
) -> dict[str, str]:
    """``index.md`` text for every folder of the concept tree, none with frontmatter: only the bundle's root
    ``index.md`` (``root_index``) may carry it (OKF v0.2 §6, §11). ``memo``: each folder's text as last made,
    with what it was made from (a watcher's: only the folders whose docs changed are made again)."""
    return folder_texts(folder_keys(docs, title, extra_folders), memo)


IndexKey = tuple[
    tuple[Doc, ...], tuple[str, ...], str
]  # what a folder's index.md is made from: docs, subfolders, title


def folder_keys(docs: Iterable[Doc], title: str, extra_folders: Iterable[str] = ()) -> dict[str, IndexKey]:
    """What each folder's ``index.md`` is made from (``folder_texts``), by folder, in sorted order."""
    by_folder: dict[str, list[Doc]] = defaultdict(list)
    folders = {""}
    for doc in docs:  # a doc path is relative, without "//" or a trailing "/": its folder is all before the last "/"
        by_folder[doc.doc_path.rpartition("/")[0]].append(doc)
    for folder in {*by_folder, *extra_folders}:
        while folder and folder not in folders:
            folders.add(folder)
            folder = posixpath.dirname(folder)
    subfolders: dict[str, list[str]] = defaultdict(list)
    for folder in folders - {""}:
        subfolders[posixpath.dirname(folder)].append(folder)
    return {f: (tuple(by_folder[f]), tuple(sorted(subfolders[f])), title) for f in sorted(folders)}


def folder_texts(keys: Mapping[str, IndexKey], memo: dict[str, Any] | None = None) -> dict[str, str]:
    """Each folder's ``index.md`` made from its key (``folder_keys``); ``memo`` as in ``folder_indexes``."""
    made = {}
    for f, key in keys.items():
        was = memo.get(f) if memo is not None else None
        made[f] = (key, was[1] if was is not None and was[0] == key else _index_text(f, *key))
    if memo is not None:  # this convert's folders only: the memo never outgrows the vault
        memo.clear()
        memo.update(made)
    return {f: text for f, (_, text) in made.items()}


def _index_text(folder: str, docs: tuple[Doc, ...], subs: tuple[str, ...], title: str) -> str:
    lines = [f"# {_md(posixpath.basename(folder) or title)}", ""]
    for sub in subs:
        lines.append(f"* [{_md(posixpath.basename(sub))}/]({quote(posixpath.basename(sub))}/index.md) - folder")
    for doc in sorted(docs, key=lambda d: d.doc_path):
        desc = f" - {_one_line(doc.description)}" if doc.description else ""
        lines.append(f"* [{_md(doc.title)}]({quote(posixpath.basename(doc.doc_path))}){desc}")
    return "\n".join(lines) + "\n"


ROOT_ENTRIES = (
    (f"{CONCEPTS}/index.md", "Concepts", "the vault's notes as typed concept docs, mirroring its folders"),
    ("SKILL.md", "Skill", "how an agent uses this bundle: the docs, okf.duckdb's tables, the MCP tools"),
    ("link-health.md", "Link health", "broken, ambiguous and alias-only links, orphans, hubs, unlinked mentions"),
)


def root_index(title: str) -> str:
    """The bundle's root ``index.md``: the one file that carries ``okf_version``, and the entry to the rest."""
    lines = [f'---\nokf_version: "{OKF_VERSION}"\n---\n# {_md(_one_line(title))}', ""]
    lines += [f"* [{name}]({path}) - {what}" for path, name, what in ROOT_ENTRIES]
    return "\n".join(lines) + "\n"


def check_output(vault: Path, out: Path, *, force: bool = False, listing: Listing | None = None) -> None:
    """Refuse, at once, an output inside the vault, a vault inside the output, a folder that is not a bundle and
    a bundle another run is using. Files vault2okf did not write are looked for under the lock
    (``prepare_output``): listing a big bundle twice would cost a convert with nothing to do a fifth of its time."""
    _check_paths(vault, out)
    with bundle_lock(out, "converting"):  # fail before the work, not after it, when another run holds it
        pass
    _check_bundle(out, force, scan=False, listing=listing)


def prepare_output(
    vault: Path, out: Path, *, force: bool = False, busy: Iterable[Path] = (), listing: Listing | None = None
) -> None:
    """Under the bundle lock: finish what a killed run left beside ``out``, then check ``out`` again. ``busy``:
    the old generations this process deletes on a thread or keeps to build the next one in (not leftovers).
    ``listing``: the bundle's folders as this process left them; while they are, no file was added, so the
    bundle is not listed."""
    recover(out, busy)
    _check_paths(vault, out)
    _check_bundle(out, force, listing=listing if listing is not None else read_listing(out))


def _check_paths(vault: Path, out: Path) -> None:
    if os.path.ismount(out):  # the bundle is swapped in by renaming a folder beside it: a mount point cannot be
        raise Vault2OkfError(
            f"{out} is a mount point, and a bundle is replaced by renaming the folder beside it: write the bundle "
            f"into a folder inside it instead, e.g. -o {out / 'bundle'}"
        )
    if out == vault or out.is_relative_to(vault):
        raise Vault2OkfError(f"output {out} is inside the vault {vault}; choose a folder outside it")
    if vault.is_relative_to(out):
        raise Vault2OkfError(f"the vault {vault} is inside the output {out}; choose another output folder")


def _check_bundle(out: Path, force: bool, *, scan: bool = True, listing: Listing | None = None) -> None:
    if listing is not None and listing.holds(out):  # the bundle as this process sealed it, marker and all
        return
    if not out.exists() and not out.is_symlink():
        return
    if not out.is_dir():
        raise Vault2OkfError(f"{out} exists and is not a folder; choose a new or empty folder for the bundle.")
    if not any(out.iterdir()):
        return
    marker = read_marker(out)
    if marker is None:
        raise Vault2OkfError(
            f'{out} exists and is not a vault2okf bundle (no {MARKER} saying "tool": "{TOOL}"); refusing to '
            "replace it. Choose an empty or new folder."
        )
    foreign = [] if force or not scan else foreign_files(out, marker)
    if foreign:
        more = f" and {len(foreign) - SHOWN} more" if len(foreign) > SHOWN else ""
        raise Vault2OkfError(
            f"{out} holds {len(foreign)} file(s) that vault2okf did not write, which replacing the bundle would "
            f"delete: {', '.join(foreign[:SHOWN])}{more}. Move them out of the bundle (its index under {STATE}/ "
            "is kept anyway), or pass --force to replace the bundle regardless."
        )


def read_marker(bundle: Path) -> dict[str, Any] | None:
    """The bundle's marker when it is vault2okf's (a JSON object with ``"tool": "vault2okf"``), else None."""
    try:
        marker = json.loads((bundle / MARKER).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and marker.get("tool") == TOOL else None


def foreign_files(bundle: Path, marker: Mapping[str, Any]) -> list[str]:
    """Files in the bundle that vault2okf did not write: not in the marker's ``files``.

    A bundle from before the marker listed its files is judged by the layout: anything at the top level
    other than the bundle's own entries is foreign. Retriever state under ``.vault2okf/`` is never foreign.
    A file vault2okf wrote and someone edited is not foreign: it is generated output, rewritten each time.
    """
    found = tree_files(bundle)
    written = marker.get("files")
    if not isinstance(written, list | dict):
        return [f for f in found if f.split("/", 1)[0] not in LAYOUT]
    wrote = set(written)
    return [f for f in found if f not in wrote]


def seal(stage: Path, files: Iterable[str] | None = None) -> list[str]:
    """Record in the marker every file of the new bundle, so that the next convert can tell the files it
    wrote from files a user added (``foreign_files``). A list of paths, so that the same vault still gives
    byte-identical bundles. Returns it. ``files``: every file the convert put in ``stage`` (outside its state),
    where it knows them, instead of listing the stage (``tree_files``; 0.2 s at 13k notes): sorted as it sorts."""
    marker_path = stage / MARKER
    marker = json.loads(marker_path.read_text("utf-8"))
    marker["files"] = files = tree_files(stage) if files is None else sorted(set(files))
    marker_path.write_text(json.dumps(marker, ensure_ascii=False) + "\n", encoding="utf-8")
    return files


# a folder changed this close to its listing may change again with the same mtime: file systems that keep
# nanoseconds stamp a change to the kernel's tick (4 ms at most here); those that keep seconds, to the second
RACY_NS, RACY_COARSE_NS = 100_000_000, 2_000_000_000


@dataclass(frozen=True)
class Listing:
    """The folders of a bundle as a convert left it (its marker listing every file, ``seal``): each folder's
    mtime and inode, and the marker's signature. A file added, removed or renamed in a folder changes the
    folder's mtime; while every folder and the marker are as recorded, the bundle holds the files the marker
    lists and nothing else, and ``foreign_files`` need not list it. A folder changed within ``RACY_NS`` of the
    recording (a timestamp may not tell two changes that close apart) is listed again, alone, each time."""

    folders: dict[str, tuple[int, int]]  # folder ("" the bundle) -> (mtime_ns, inode)
    racy: dict[str, frozenset[str]]  # folder -> the names it holds, for the folders changed close to the recording
    marker: tuple[int, ...]  # (size, mtime_ns, inode) of the marker

    def holds(self, out: Path) -> bool:
        """Is the bundle at ``out`` still the one recorded: no folder's names changed, the marker the same?"""
        root = str(out)
        for folder, sig in self.folders.items():
            try:
                info = os.lstat(os.path.join(root, folder) if folder else root)
            except OSError:
                return False
            if (info.st_mtime_ns, info.st_ino) != sig:
                return False
        if _file_sig(os.path.join(root, MARKER)) != self.marker:
            return False
        return all(_names(os.path.join(root, f) if f else root) == names for f, names in self.racy.items())


def listing(out: Path, files: list[str], *, state: bool = True) -> Listing | None:
    """The ``Listing`` of the bundle at ``out`` whose marker lists ``files`` (``seal``); None where a folder is
    missing (it is not the bundle sealed). ``state=False``: a folder without its state folder (an emptied
    ``Spare``)."""
    names = _expected(files, state=state)
    now = time.time_ns()
    folders = {}
    for folder in names:
        try:
            info = os.lstat(os.path.join(out, folder) if folder else out)
        except OSError:
            return None
        folders[folder] = (info.st_mtime_ns, info.st_ino)
    fine = any(mtime % 1_000_000_000 for mtime, _ in folders.values())  # else the file system keeps seconds
    since = now - (RACY_NS if fine else RACY_COARSE_NS)
    racy = {f: frozenset(names[f]) for f, (mtime, _) in folders.items() if mtime >= since}
    return Listing(folders, racy, _file_sig(out / MARKER))


def save_listing(stage: Path, found: Listing) -> None:
    """``found``, the listing of the sealed ``stage``, into its state folder, swapped in with it (the exchange of
    two folders changes neither their inodes nor their mtimes): the next convert, a fresh process, checks the
    bundle's folders against it (``read_listing``) rather than list every file for foreign ones (0.17 s at 13k
    notes). Sealed by its sha256; it names the marker by its signature, so a listing that is not the bundle's own
    (one the swap moved from an older generation's state folder, the marker rewritten since) never holds."""
    data = marshal.dumps((found.folders, found.racy, found.marker))
    write_file(stage / LISTING, _LISTING_MAGIC + hashlib.sha256(data).digest() + data)


def read_listing(out: Path) -> Listing | None:
    """The listing the convert that wrote ``out`` saved (``save_listing``); None where there is none, it is not a
    regular file, or its bytes are not the ones written. It is trusted only through ``Listing.holds``."""
    path = out / LISTING
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):  # a pipe would block the read
            return None
        raw, size = path.read_bytes(), len(_LISTING_MAGIC)
        head, digest, data = raw[:size], raw[size : size + 32], raw[size + 32 :]
        if head != _LISTING_MAGIC or hashlib.sha256(data).digest() != digest:
            return None
        folders, racy, marker = marshal.loads(data)
        found = Listing(
            {str(f): (int(m), int(i)) for f, (m, i) in folders.items()},
            {str(f): frozenset(map(str, names)) for f, names in racy.items()},
            tuple(int(v) for v in marker),
        )
    except Exception:  # noqa: BLE001 - unreadable or wrongly shaped: the bundle is listed, as with none
        return None
    return found if found.marker else None


def _expected(files: list[str], *, state: bool = True) -> dict[str, set[str]]:
    """Each folder of a bundle holding ``files`` (and its state folder, with ``state``) -> the names it holds."""
    names: dict[str, set[str]] = defaultdict(set)
    for rel in files:
        folder, _, name = rel.rpartition("/")
        known = folder in names
        names[folder].add(name)
        while folder and not known:  # a folder seen the first time: its parents learn its name
            folder, _, name = folder.rpartition("/")
            known = folder in names
            names[folder].add(name)
    names.setdefault("", set())  # the root, even with no file left in it (an emptied ``Spare``)
    if state:
        names[""].add(STATE)
    return names


def _names(folder: str) -> frozenset[str] | None:
    try:
        return frozenset(os.listdir(folder))
    except OSError:
        return None


def _file_sig(path: str | Path) -> tuple[int, ...]:
    try:
        info = os.lstat(path)
    except OSError:
        return ()
    return (info.st_size, info.st_mtime_ns, info.st_ino)


def tree_files(root: Path) -> list[str]:
    """Every file (and symlink) under ``root`` as a ``/`` path, sorted, skipping the state folder at the top."""
    found: list[str] = []
    folders = [""]
    while folders:
        rel = folders.pop()
        with os.scandir(root / rel) as entries:
            for entry in entries:
                path = posixpath.join(rel, entry.name) if rel else entry.name
                if path == STATE:
                    continue
                (folders if entry.is_dir(follow_symlinks=False) else found).append(path)
    return sorted(found)


def bundle_lock(out: Path, doing: str) -> AbstractContextManager[None]:
    """The bundle lock of ``vault2okf.protocol.lock`` (the one `vault2okf index` takes too), its folder made first: a
    convert may write a bundle into a folder that does not exist yet."""
    lock_path(out).parent.mkdir(parents=True, exist_ok=True)
    return lock.bundle_lock(out, doing, error=Vault2OkfError)


def write_tree(
    stage: Path,
    files: Mapping[str, str | bytes],
    copies: Mapping[str, Path],
    carried: Mapping[str, str] = {},
    *,
    folders: bool = True,
    present: set[str] | None = None,
) -> set[str]:
    """Write ``files`` (path -> content), copy ``copies`` (path -> a vault file) and hard-link ``carried``
    (path -> the same file in the old bundle, unchanged; copied where the file system has no hard links).
    ``folders=False``: the caller made the folders already (``make_folders``). ``present``: the files a recycled
    stage holds (``Spare``), each the very file of the bundle in place at its path: a carried one is left, any
    other is unlinked before it is written (never written through: the bundle in place holds it). Returns the
    carried paths that were copied: every other carried file is the old one (same inode, size and mtime)."""
    if present:
        clear(stage, (*files, *copies), present)
        carried = {rel: old for rel, old in carried.items() if not _taken(rel, present)}
    if folders:
        make_folders(stage, (*files, *copies, *carried))
    with ThreadPoolExecutor(max_workers=8) as pool:  # file creation is I/O bound; threads overlap it
        list(pool.map(lambda item: write_file(stage / item[0], item[1]), files.items()))
        list(pool.map(lambda item: shutil.copyfile(item[1], stage / item[0]), copies.items()))
    root = str(stage)
    copied = set()
    for rel, old in carried.items():
        try:
            os.link(old, os.path.join(root, rel))
        except OSError:
            shutil.copy2(old, os.path.join(root, rel))
            copied.add(rel)
    return copied


def _taken(rel: str, present: set[str]) -> bool:
    """A carried file the recycled stage holds already (the very file of the bundle in place): taken as it is."""
    if rel in present:
        present.discard(rel)
        return True
    return False


def clear(stage: Path, paths: Iterable[str], present: set[str]) -> None:
    """Unlink the files of a recycled stage at ``paths`` (those it holds) before they are written anew: each is a
    hard link to the bundle in place, which writing into it would change."""
    for rel in paths:
        if rel in present:
            present.discard(rel)
            os.unlink(os.path.join(stage, rel))


def make_folders(stage: Path, paths: Iterable[str]) -> None:
    """The folders holding ``paths`` (relative to ``stage``), parents first."""
    made: set[str] = set()
    for folder in sorted({posixpath.dirname(rel) for rel in paths}):
        if folder and folder not in made:
            os.makedirs(os.path.join(stage, folder), exist_ok=True)
            while folder and folder not in made:
                made.add(folder)
                folder = posixpath.dirname(folder)


class Writer:
    """Files written on threads while the caller goes on (file creation is I/O bound, and a busy disk makes
    each one wait); ``close`` returns when all are written and raises the first error. One per process: a
    forked worker makes its own; ``close`` it where it was made."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.pool = ThreadPoolExecutor(max_workers=4)
        self.pending: list[Future[None]] = []

    def write(self, path: str, content: str | bytes) -> None:
        self.pending.append(self.pool.submit(write_file, path, content))

    def close(self) -> None:
        """Wait for every file; the first error is raised. The writer's threads are gone after it."""
        try:
            for done in self.pending:
                done.result()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


def write_file(path: str | Path, content: str | bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(content if isinstance(content, bytes) else content.encode("utf-8"))


def swap_into_place(stage: Path, out: Path, *, remove: bool = True) -> Path | None:
    """Put the new bundle ``stage`` at ``out``, which is never missing meanwhile: one atomic exchange of the two
    folders (``renameat2(RENAME_EXCHANGE)``), then the retriever's state (index, caches) moves from the old
    bundle into the new one, then the old one is removed. Call it under the bundle lock; a run killed anywhere
    in here is finished by the next run's ``recover``. Where folders cannot be exchanged (not Linux, or a file
    system without it) it renames twice, and ``out`` is missing between the two renames.

    ``remove=False``: the old bundle is left, emptied of its state, for the caller to delete (a watcher deletes
    it while it waits for the next edit); it is returned. Left by a killed run, the next run deletes it.
    """
    if not out.exists() and not out.is_symlink():
        os.rename(stage, out)
        return None
    if _exchange(stage, out):
        old = stage  # the old bundle now sits where the new one was built
    else:
        old = _sibling(out, "old")
        os.rename(out, old)
        os.rename(stage, out)
    adopt_state(old, out)
    if not remove:
        return old
    shutil.rmtree(old)
    return None


def adopt_state(old: Path, new: Path) -> None:
    """Move the entries of ``old/.vault2okf`` that ``new`` lacks (the index, caches) into ``new``, one rename
    each; the new bundle's own marker stays. Safe to repeat after a crash: what moved is not moved again."""
    source = old / STATE
    if not source.is_dir():
        return
    target = new / STATE
    target.mkdir(exist_ok=True)
    for entry in sorted(source.iterdir()):
        if entry.name != posixpath.basename(MARKER) and not os.path.lexists(target / entry.name):
            os.rename(entry, target / entry.name)


def recover(out: Path, busy: Iterable[Path] = ()) -> list[Path]:
    """Finish what a killed convert left beside ``out`` (call under the bundle lock): put back a bundle that
    was moved aside, move the index out of a leftover into ``out``, then delete the leftovers.

    Returns the leftovers it found. While ``out`` is not a bundle, a leftover holding an index is kept.
    """
    kept = set(busy)
    leftovers = [p for p in _leftovers(out) if p not in kept]
    if not out.exists() and not out.is_symlink():
        moved = [p for p in leftovers if p.name.startswith(f".{out.name}.old-") and read_marker(p) is not None]
        if moved:
            os.rename(moved[0], out)
    is_bundle = read_marker(out) is not None
    for path in leftovers:
        if not os.path.lexists(path):
            continue
        try:
            if is_bundle:
                adopt_state(path, out)
            if is_bundle or not _holds_state(path):
                shutil.rmtree(path, onerror=_gone_is_fine)
        except FileNotFoundError:
            continue  # deleted meanwhile: a watcher removes its last generation after it released the lock
    return leftovers


def _gone_is_fine(_func: Any, _path: str, info: Any) -> None:
    """``rmtree``'s error handler: a file or folder already gone is what was wanted; anything else is raised."""
    if not isinstance(info[1], FileNotFoundError):
        raise info[1]


def retire(old: Path) -> Path:
    """Rename an old generation left by ``swap_into_place(remove=False)`` out of the way of the next staging
    folder (``.NAME.tmp-PID`` -> ``.NAME.tmp-PID-NS``), for its owner to delete meanwhile; a killed owner
    leaves it to the next run's ``recover``."""
    retired = old.with_name(f"{old.name}-{time.time_ns()}")
    os.rename(old, retired)
    return retired


_REMOVER = "import shutil, sys; shutil.rmtree(sys.argv[1], ignore_errors=True)"


def remove_detached(old: Path) -> None:
    """Delete an old generation (``swap_into_place(remove=False)``) in a child process of its own session that
    outlives this one, so a command ends without waiting for thousands of unlinks (0.2 s at 4.3k notes on a
    quiet disk, 10-22 s at 13k on a busy one). It is retired first (``retire``): a killed child leaves it to the
    next run's ``recover``, which deletes it beside a child still at work. Where no child can be started it is
    deleted here."""
    retired = retire(old)
    try:
        subprocess.Popen(  # noqa: S603 - this interpreter, a fixed program, the path as an argument
            [sys.executable, "-I", "-S", "-c", _REMOVER, str(retired)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        shutil.rmtree(retired, onerror=_gone_is_fine)


def _holds_state(path: Path) -> bool:
    state = path / STATE
    return state.is_dir() and any(e.name != posixpath.basename(MARKER) for e in state.iterdir())


@dataclass
class Spare:
    """The generation a watcher's swap took out of place (at the staging folder's name), kept to build the next one
    in rather than deleted (thousands of unlinks and rmdirs) while the next is built anew (as many mkdirs and
    links). ``listing`` (recorded while it was the bundle) says it is as sealed: its files the ones ``files``
    lists, nothing added, removed or renamed; ``shared``: those that are the very files (hard links) of the
    bundle in place now. The next stage is it, every other file unlinked (``recycle``): the files the next
    convert carries from the bundle in place are there already, it writes the rest (``write_tree``'s
    ``present``), and what it does not claim goes (``finish``). A stage is never read by anyone but its builder,
    so a crash at any moment leaves the bundle in place whole; the stage is a leftover the next run deletes."""

    path: Path
    listing: Listing
    files: list[str]
    shared: frozenset[str]
    emptied: bool = False  # emptied already (``empty``): it holds ``files``, all shared, and no state folder


def empty(spare: Spare) -> Spare | None:
    """``spare`` emptied of all but the files it shares with the bundle in place, as ``recycle`` would at the next
    convert, for a watcher to do on a thread while it waits for the next edit: the ``Spare`` it is then, listed
    anew and checked against a listing of its tree made after (a file dropped in meanwhile is seen by one or the
    other). None where it is not as sealed, or changed under us: the next stage is a new one."""
    stage = spare.path
    if spare.emptied or not spare.listing.holds(stage):
        return spare if spare.emptied else None
    try:
        emptied = _unshared_removed(spare)
    except OSError:
        return None
    files = [rel for rel in spare.files if rel in spare.shared]
    recorded = listing(stage, files, state=False)
    if recorded is None or not _as_left(spare, recorded, emptied, _expected(files, state=False)):
        return None
    return Spare(stage, recorded, files, frozenset(files), emptied=True)


def _unshared_removed(spare: Spare) -> set[str]:
    """Unlink every file of ``spare`` it does not share with the bundle in place, and its state folder (the state's
    files are never taken: the convert cache's base is linked anew); prune the folders left empty. Returns the
    folders it emptied files from (``OSError``: changed under us)."""
    stage = spare.path
    shutil.rmtree(stage / STATE)
    emptied = set()
    for rel in spare.files:
        if rel not in spare.shared:
            os.unlink(os.path.join(stage, rel))
            emptied.add(posixpath.dirname(rel))
    _prune(stage, emptied)
    return emptied


def _as_left(spare: Spare, recorded: Listing, emptied: set[str], names: dict[str, set[str]]) -> bool:
    """Does an emptied spare hold ``names`` and nothing else, checked after its listing was ``recorded`` (a file
    dropped in after that changes its folder's time)? The folders it emptied (and their parents, and the folders
    changed close to its first listing) are listed; every other must be as that listing recorded it."""
    listed = set(spare.listing.racy)
    for folder in emptied:
        while folder not in listed:
            listed.add(folder)
            folder = posixpath.dirname(folder)
    listed.add("")
    root = str(spare.path)
    for folder, sig in recorded.folders.items():
        if folder in listed:
            if _names(os.path.join(root, folder) if folder else root) != names[folder]:
                return False
        elif spare.listing.folders.get(folder) != sig:
            return False
    return True


def recycle(out: Path, spare: Spare | None) -> tuple[Path, set[str]]:
    """The staging folder for the next generation: ``spare`` emptied of all but the files it shares with the
    bundle in place (``empty``: emptied already, or now), where it is still as sealed; else a new empty folder
    (``staging_dir``). With the files it holds (``present``: the next convert takes or replaces them)."""
    stage = _sibling(out, "tmp")
    if spare is None or spare.path != stage or not spare.listing.holds(stage):
        return staging_dir(out), set()
    if spare.emptied:
        return stage, set(spare.files)
    try:
        _unshared_removed(spare)
    except OSError:  # changed under us after all: a new stage
        return staging_dir(out), set()
    return stage, set(spare.shared) & set(spare.files)


def finish(stage: Path, present: set[str]) -> None:
    """A recycled stage's files the new generation did not claim (their notes gone) unlinked, and the folders
    that left empty removed, so it holds what a new stage would."""
    for rel in present:
        os.unlink(os.path.join(stage, rel))
    _prune(stage, {posixpath.dirname(rel) for rel in present})
    present.clear()


def _prune(stage: Path, folders: Iterable[str]) -> None:
    """Remove the folders among ``folders`` (and their parents) that are empty, deepest first."""
    todo = set()
    for folder in folders:
        while folder:
            todo.add(folder)
            folder = posixpath.dirname(folder)
    for folder in sorted(todo, key=lambda f: (-f.count("/"), f)):
        try:
            os.rmdir(os.path.join(stage, folder))
        except OSError as error:
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                raise


def stage_path(out: Path) -> Path:
    """Where the next generation of ``out`` is built (``staging_dir``, ``recycle``)."""
    return _sibling(out, "tmp")


def staging_dir(out: Path) -> Path:
    stage = _sibling(out, "tmp")
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    return stage


def _sibling(out: Path, kind: str) -> Path:
    return out.parent / f".{out.name}.{kind}-{os.getpid()}"


def _leftovers(out: Path) -> list[Path]:
    """``.NAME.tmp-PID`` and ``.NAME.old-PID`` beside ``out``: only ever left by a run that was killed."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.(tmp|old)-\d+(-\d+)?")  # -N: retired, being deleted
    if not out.parent.is_dir():
        return []
    return sorted(p for p in out.parent.iterdir() if pattern.fullmatch(p.name) and p.is_dir() and not p.is_symlink())


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one atomic step; False where the kernel or file system cannot (the caller renames)."""
    if not sys.platform.startswith("linux"):
        return False
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:  # a libc older than glibc 2.28
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _md(value: str) -> str:
    """A title or folder name as link text: escaped (``mdtext.text``), so it is shown, never read as HTML."""
    return mdtext.text(value)


def _one_line(text: str) -> str:
    return " ".join(text.split())
