"""Resolve a link target to a vault file with Obsidian's rules, in one function (``Resolver.resolve``).

Order, first match wins:
1. an empty target (``[[#Heading]]``) is the note itself;
2. a pinned override from config (``[links.overrides]``);
3. note paths: a bare name (no ``/``) matches every note with that basename; ``./`` and ``../`` are relative
   to the linking note; any other path is the exact vault path (``/`` prefix allowed), then relative to the
   linking note's folder, then a path suffix (``folder/Note``), then the basename; each step case-sensitive
   first, then case-insensitive, after trimming, dropping ``.md`` and NFC;
4. frontmatter ``aliases`` (reported: Obsidian itself leaves a bare ``[[Alias]]`` unresolved);
5. attachments (any non-``.md`` file) by the same path rules;
6. **excluded**, not broken, since the note is left out on purpose: a note in an excluded folder (``[walk]
   exclude``, templates) by the same path rules; a path through an excluded folder (``z_Templates/...``) even
   when the file is not there; a name matching ``[links] excluded_names`` (``Template*``: templates live in
   excluded folders);
7. a target with a file extension that matches nothing is a missing attachment, anything else is broken.

A pinned override is ``overridden`` (it points at a note; an override to an attachment is an attachment).

A block reference (``[[Note#^id]]``) that resolves to a note without that block id, or whose id is malformed,
is **missing_block** (``check_blocks``, after every note's block ids are known): it still links to the note.

Several candidates at one step make the link **ambiguous**: the one chosen is in the same folder as the
linking note if one is, else the shortest path (fewest folders, then fewest characters), else the first
alphabetically, and every candidate is reported.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from vault2okf.errors import Vault2OkfError
from vault2okf.parse import Link, block_ref
from vault2okf.walk import is_excluded

_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,5}$")


class Status(StrEnum):
    RESOLVED = "resolved"
    AMBIGUOUS = "ambiguous"
    ALIAS = "alias"
    BROKEN = "broken"
    SELF = "self"
    ATTACHMENT = "attachment"
    MISSING_ATTACHMENT = "missing_attachment"
    EXCLUDED = "excluded"
    OVERRIDDEN = "overridden"
    MISSING_BLOCK = "missing_block"


# a link to a note
NOTE_STATUSES = frozenset({Status.RESOLVED, Status.AMBIGUOUS, Status.ALIAS, Status.OVERRIDDEN, Status.MISSING_BLOCK})
_BLOCK_CHECKED = frozenset({Status.RESOLVED, Status.ALIAS, Status.OVERRIDDEN, Status.SELF})


@dataclass(frozen=True)
class Resolution:
    status: Status
    path: str | None  # vault path of the note or attachment (None when broken / missing)
    candidates: tuple[str, ...] = ()  # every candidate of an ambiguous link, the chosen one first
    rule: str = ""  # which step matched: self, override, relative, exact, suffix, basename, alias


class _PathIndex:
    """Vault paths looked up by full path, by path suffix and by basename, case-folded."""

    def __init__(self, paths: Iterable[str], strip_md: bool) -> None:
        self.paths = frozenset(paths)
        self.exact: dict[str, str] = {}
        self.folded: dict[str, list[str]] = defaultdict(list)
        self.basename: dict[str, list[str]] = defaultdict(list)
        for path in sorted(self.paths):
            key = _strip_md(path) if strip_md else path  # ``Note.MD`` is the note ``Note`` too
            self.exact.setdefault(key, path)
            self.folded[key.casefold()].append(path)
            self.basename[posixpath.basename(key).casefold()].append(path)

    def lookup(self, key: str, folder: str) -> tuple[list[str], str]:
        if key.startswith(("./", "../")):
            return self._exact(posixpath.normpath(posixpath.join(folder, key))), "relative"
        key = key.lstrip("/")
        if "/" not in key:  # a bare name: every note with that basename is a candidate
            found = self.basename.get(key.casefold(), [])
            return found, "exact" if len(found) == 1 and self._exact(key) == found else "basename"
        for found, rule in (
            (self._exact(key), "exact"),
            (self._exact(posixpath.join(folder, key)) if folder else [], "relative"),
            (self._suffix(key), "suffix"),
            (self.basename.get(posixpath.basename(key).casefold(), []), "basename"),
        ):
            if found:
                return found, rule
        return [], ""

    def _exact(self, key: str) -> list[str]:
        if key in self.exact:
            return [self.exact[key]]
        return self.folded.get(key.casefold(), [])

    def _suffix(self, key: str) -> list[str]:
        tail = "/" + key.casefold()
        base = posixpath.basename(key).casefold()
        return [p for p in self.basename.get(base, []) if _strip_md(p).casefold().endswith(tail)]


class Resolver:
    def __init__(
        self,
        notes: Iterable[str],
        attachments: Iterable[str] = (),
        aliases: Mapping[str, Iterable[str]] | None = None,
        overrides: Mapping[str, str] | None = None,
        excluded: Iterable[str] = (),
        exclude: Sequence[str] = (),
        excluded_names: Sequence[str] = (),
        source: str = "vault2okf.toml",
    ) -> None:
        """``excluded``: files under excluded folders; ``exclude``: the ``[walk] exclude`` patterns (a link whose
        path names such a folder is excluded even when the file is gone); ``excluded_names``: glob patterns
        (``[links] excluded_names``, default ``Template*``) for names of notes that live in excluded folders;
        ``source``: the config file the overrides come from, as an error names it."""
        self.source = source
        self.exclude = tuple(exclude)
        self.excluded_names = tuple(n.casefold() for n in excluded_names)
        self.notes = _PathIndex(notes, strip_md=True)
        self.excluded = _PathIndex((p for p in excluded if p.lower().endswith(".md")), strip_md=True)
        self.attachments = _PathIndex(attachments, strip_md=False)
        self.aliases = alias_table(aliases or {})
        self.overrides = {normalise(k).casefold(): self._pinned(k, v) for k, v in (overrides or {}).items()}

    def _pinned(self, name: str, target: str) -> str:
        """The vault path an override pins ``name`` to; an error when it names no file of the vault."""
        path = normalise(target, keep_md=True).lstrip("/")
        for candidate in (path, f"{path}.md"):
            if candidate in self.notes.paths or candidate in self.attachments.paths:
                return candidate
        raise Vault2OkfError(
            f"{self.source} [links.overrides]: {name!r} = {target!r} names no file in the vault; "
            "give a vault-relative path such as 'People/Bob.md'"
        )

    def resolve(self, target: str, source: str) -> Resolution:
        key = normalise(target)
        folder = posixpath.dirname(source)
        if not key:
            return Resolution(Status.SELF, source, rule="self")
        if key.casefold() in self.overrides:
            pinned = self.overrides[key.casefold()]
            status = Status.ATTACHMENT if pinned in self.attachments.paths else Status.OVERRIDDEN
            return Resolution(status, pinned, rule="override")
        found, rule = self.notes.lookup(key, folder)
        if found:
            return _pick(found, folder, Status.RESOLVED, rule)
        if key.casefold() in self.aliases:
            return _pick(self.aliases[key.casefold()], folder, Status.ALIAS, "alias")
        found, rule = self.attachments.lookup(normalise(target, keep_md=True), folder)
        if found:  # several: still an attachment (the nearest, as Obsidian picks), its candidates kept for the report
            picked = _pick(found, folder, Status.ATTACHMENT, rule)
            return Resolution(Status.ATTACHMENT, picked.path, picked.candidates, rule)
        found, rule = self.excluded.lookup(key, folder)
        if found:
            return Resolution(Status.EXCLUDED, found[0], tuple(found) if len(found) > 1 else (), "excluded")
        parts = key.lstrip("/").split("/")
        if any(is_excluded("/".join(parts[: i + 1]), parts[i], self.exclude) for i in range(len(parts) - 1)):
            return Resolution(Status.EXCLUDED, None, rule="excluded folder")
        if any(fnmatch.fnmatchcase(parts[-1].casefold(), pattern) for pattern in self.excluded_names):
            return Resolution(Status.EXCLUDED, None, rule="excluded name")
        has_ext = _EXTENSION.search(key) is not None and not target.strip().endswith(".md")
        return Resolution(Status.MISSING_ATTACHMENT if has_ext else Status.BROKEN, None)


def check_blocks(
    links: Sequence[Link], resolved: Sequence[Resolution], blocks: Mapping[str, frozenset[str]]
) -> tuple[Resolution, ...]:
    """``resolved`` with each block reference whose note has no such block id (``blocks``: vault path -> its
    ids, case-folded), or whose id is malformed, made ``missing_block``. An ambiguous link stays ambiguous:
    which note it means comes first. The same tuple when nothing changes (most notes have no block refs)."""
    out: list[Resolution] | None = None
    for i, (link, res) in enumerate(zip(links, resolved, strict=True)):
        if link.anchor is None or "^" not in link.anchor or res.status not in _BLOCK_CHECKED:
            continue
        block = block_ref(link.anchor)
        if block is None or (block and block.casefold() in blocks.get(res.path or "", ())):
            continue
        out = out if out is not None else list(resolved)
        out[i] = Resolution(Status.MISSING_BLOCK, res.path, res.candidates, res.rule)
    return tuple(resolved) if out is None else tuple(out)


def block_sets(notes: Iterable[tuple[str, Sequence[str]]]) -> dict[str, frozenset[str]]:
    """Each note's block ids, case-folded, for ``check_blocks`` (notes without any left out)."""
    return {path: frozenset(b.casefold() for b in ids) for path, ids in notes if ids}


def block_problem(link: Link, res: Resolution) -> str:
    """Why a ``missing_block`` link is one: the id is malformed, or the note has no block with it."""
    block = block_ref(link.anchor)
    note = res.path or "the note"
    if not block:
        written = (link.anchor or "").split("#")[-1].strip()
        return f"{written!r} is not a block id (Latin letters, digits and dashes after ^)"
    return f"{note} has no block ^{block} (a line ending in ' ^{block}')"


def alias_key(name: str) -> str:
    """How an alias is keyed, and how a link's target is looked up among the aliases: normalised, case-folded."""
    return normalise(name).casefold()


def alias_table(aliases: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Alias key -> the notes that have that alias, in path order (``Resolver.aliases``)."""
    table: dict[str, list[str]] = {}
    for path, names in sorted(aliases.items()):
        for name in names:
            table.setdefault(alias_key(name), []).append(path)
    return table


@lru_cache(maxsize=1 << 16)  # the report asks again for every link; a vault writes the same targets over and over
def normalise(target: str, keep_md: bool = False) -> str:
    """Trim, NFC, ``\\`` to ``/``, and drop a trailing ``.md`` (unless ``keep_md``)."""
    key = unicodedata.normalize("NFC", target.strip()).replace("\\", "/")
    return key if keep_md else _strip_md(key)


def _strip_md(path: str) -> str:
    return path[:-3] if path.lower().endswith(".md") else path


def _pick(found: list[str], folder: str, status: Status, rule: str) -> Resolution:
    if len(found) == 1:
        return Resolution(status, found[0], (), rule)
    ranked = sorted(found, key=lambda p: (posixpath.dirname(p) != folder, p.count("/"), len(p), p))
    return Resolution(Status.AMBIGUOUS, ranked[0], tuple(ranked), rule)
