"""Where each note lands under ``concepts/``: one doc path per note, unique even on a case-insensitive disk.

The rule (docs/ARCHITECTURE.md, "Doc paths"):
1. a note's wanted doc path is its vault path, with reserved names renamed (``index.md`` -> ``index (note).md``,
   ``log.md`` -> ``log (note).md``, a bare ``.md`` -> ``_untitled.md``) and the extension written ``.md``;
2. doc paths are compared case-insensitively (NFC, case-folded), so the bundle can be copied to macOS/Windows;
3. notes that keep their own name claim their doc path first, in vault-path order; then the renamed ones
   (and the later of two names that differ only in case) take their wanted path if it is free, else the
   first free ``stem (2).md``, ``stem (3).md``, … in the same folder. Each such note is reported.
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Iterable

from vault2okf.bundle import doc_path_for
from vault2okf.parse import Problem


def assign_doc_paths(paths: Iterable[str]) -> tuple[dict[str, str], list[tuple[str, Problem]]]:
    """vault path -> doc path for every note, and a ``collision`` problem for each note moved aside. The last
    answer is remembered (one): a watcher's next convert with the same notes takes it (copies of it)."""
    key = tuple(paths)
    if _LAST[0] is not None and _LAST[0][0] == key:
        doc_of, problems = _LAST[0][1]
        return dict(doc_of), list(problems)
    found = _assign(key)
    _LAST[0] = (key, found)
    return dict(found[0]), list(found[1])


_LAST: list[tuple[tuple[str, ...], tuple[dict[str, str], list[tuple[str, Problem]]]] | None] = [None]


def _assign(paths: Iterable[str]) -> tuple[dict[str, str], list[tuple[str, Problem]]]:
    ordered = sorted(paths)
    wanted = {p: _wanted(p) for p in ordered}
    taken: dict[str, str] = {_key(f): f for p in ordered for f in _folders(p)}  # a doc may not shadow a folder
    doc_of: dict[str, str] = {}
    for path in ordered:
        if wanted[path] == path and _key(path) not in taken:
            doc_of[path] = path
            taken[_key(path)] = path
    problems: list[tuple[str, Problem]] = []
    for path in ordered:
        if path in doc_of:
            continue
        doc = _free(wanted[path], taken)
        doc_of[path] = doc
        owner = taken.get(_key(wanted[path]))
        taken[_key(doc)] = path
        if doc != wanted[path]:
            message = f"its doc path {wanted[path]} is taken by {owner}; written as {doc} instead. Rename one of them"
            problems.append((path, Problem("collision", message)))
    return doc_of, problems


def _wanted(path: str) -> str:
    doc = doc_path_for(path)
    return doc if doc.endswith(".md") else doc[:-3] + ".md"


def _free(doc: str, taken: dict[str, str]) -> str:
    stem = doc[:-3]
    candidate, n = doc, 2
    while _key(candidate) in taken:
        candidate, n = f"{stem} ({n}).md", n + 1
    return candidate


def _key(path: str) -> str:
    return unicodedata.normalize("NFC", path).casefold()


def _folders(path: str) -> Iterable[str]:
    folder = posixpath.dirname(path)
    while folder:
        yield folder
        folder = posixpath.dirname(folder)
