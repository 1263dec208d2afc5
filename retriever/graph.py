"""The note graph from ``okf.duckdb``: concepts and undirected one-hop neighbours with the text that links them."""

from __future__ import annotations

import os
import posixpath
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from retriever.cachefile import CacheDamaged, read_cache, size_limit, write_cache
from retriever.okf import analytics_rows, graph_rows
from vault2okf.protocol import state_dir


@dataclass(frozen=True)
class Concept:
    id: str
    title: str
    vault_path: str
    doc_path: str
    type: str
    aliases: tuple[str, ...]
    session_number: int | None
    session_date: str | None
    tags: tuple[str, ...] = ()
    date: str | None = None  # YYYY-MM-DD: what `since`/`until` compare (`retriever.filters.note_date`)

    @property
    def session_key(self) -> tuple[str, int] | None:
        """Sort key of a session note (date, then number); None for other notes."""
        if self.session_number is None and self.session_date is None:
            return None
        return (self.session_date or "", self.session_number if self.session_number is not None else -1)

    @property
    def session_label(self) -> str | None:
        if self.session_key is None:
            return None
        parts = [f"session {self.session_number}" if self.session_number is not None else "session"]
        if self.session_date:
            parts.append(self.session_date)
        return ", ".join(parts)


@dataclass
class NoteGraph:
    concepts: dict[str, Concept]
    # neighbour id -> the sentences that link the two notes (either direction)
    neighbours: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def degree(self, note_id: str) -> int:
        return len(self.neighbours.get(note_id, {}))

    def adjacent_sessions(self, note_id: str) -> list[str]:
        """The previous and next session note in the same folder, by session date then number."""
        series = self.series_of(note_id)
        if not series:
            return []
        i = series.index(note_id)
        return [n for n in series[max(i - 1, 0) : i + 2] if n != note_id]

    def series_of(self, note_id: str) -> list[str]:
        """The session notes of the note's folder in session order (its series); empty for a note that is no session."""
        concept = self.concepts.get(note_id)
        if concept is None or concept.session_key is None:
            return []
        return self._session_series[posixpath.dirname(concept.vault_path)]

    @cached_property
    def _session_series(self) -> dict[str, list[str]]:
        """Session note ids per folder, in session order; built once, not on every query."""
        series: dict[str, list[Concept]] = defaultdict(list)
        for c in self.concepts.values():
            if c.session_key is not None:
                series[posixpath.dirname(c.vault_path)].append(c)
        return {
            folder: [c.id for c in sorted(cs, key=lambda c: (c.session_key, c.id))] for folder, cs in series.items()
        }


@dataclass(frozen=True)
class GraphAnalytics:
    """What the hop's analytics priors read from ``okf.duckdb``'s ``analytics`` (``vault2okf/analytics.py``):
    each note's PageRank (summing to 1) and community. Empty for a note, or a bundle, without them."""

    pagerank: dict[str, float] = field(default_factory=dict)
    community: dict[str, str] = field(default_factory=dict)


def load_analytics(bundle: Path) -> GraphAnalytics:
    rows = analytics_rows(bundle)
    return GraphAnalytics({note: pr for note, pr, _ in rows}, {note: c for note, _, c in rows})


GRAPH_CACHE = "graph-cache.json"
GRAPH_CACHE_FORMAT = 3  # 3: concepts carry tags and date; a magic line and a head with the body's length and sha256
GRAPH_MAGIC = b"vault2okf graph cache 3\n"


def load_graph(bundle: Path) -> NoteGraph:
    """The bundle's note graph (``read_graph`` without its notices)."""
    return read_graph(bundle)[0]


def read_graph(bundle: Path) -> tuple[NoteGraph, tuple[str, ...]]:
    """The bundle's note graph and what a search should say about its cache.

    Read from ``.vault2okf/graph-cache.json`` while it was written from this very ``okf.duckdb`` (same size,
    modification time, inode and header; a convert swaps in a new file), else from the database, and then cached
    (when the bundle is writable). JSON, not a pickle: a bundle may come from someone else. The cache proves its
    body (its sha256 is in its head) and every value's type is checked: a damaged one (edited, cut, nested too
    deep, of the wrong shape, a pipe or a device in its place) is one notice, the database read and the cache
    written again, never a crash, a hang or another graph. A cold search on thellade spent ~0.2 s importing
    DuckDB and reading these rows; the cache reads in ~0.02 s."""
    key = graph_key(bundle)
    notices: tuple[str, ...] = ()
    if key:
        try:
            cached = _read_graph_cache(bundle, key)
        except CacheDamaged as damage:
            cached = None
            notices = (f"the graph cache was damaged ({damage}): rebuilt from okf.duckdb and written again",)
        if cached is not None:
            return cached, ()
    graph = _graph(*graph_rows(bundle))
    if key:
        _write_graph_cache(bundle, key, graph)
    return graph, notices


def graph_key(bundle: Path) -> list[int | str] | None:
    """What identifies the bundle's ``okf.duckdb`` as the graph was read from it (None: it cannot be read)."""
    import hashlib

    from vault2okf.protocol import DATABASE, SCHEMA_VERSION

    try:
        with (bundle / DATABASE).open("rb") as db:
            stat = os.fstat(db.fileno())
            # DuckDB's file and database headers: each checkpoint bumps a header's iteration, so a change within
            # the file system's timestamp granularity still changes the key
            header = hashlib.sha256(db.read(3 * 4096)).hexdigest()[:16]
    except OSError:
        return None  # graph_rows says what is wrong
    return [GRAPH_CACHE_FORMAT, SCHEMA_VERSION, stat.st_size, stat.st_mtime_ns, stat.st_ino, header]


def _read_graph_cache(bundle: Path, key: list[int | str]) -> NoteGraph | None:
    """The cached graph when the cache was written for ``key``; None when there is none or it is of another key
    (or of the format before this one); ``CacheDamaged`` when it is not what this code wrote."""
    import json

    path = state_dir(bundle) / GRAPH_CACHE
    try:
        found = read_cache(path, GRAPH_MAGIC, size_limit(bundle))
    except CacheDamaged:
        if _format_1(path):
            return None  # written by the version before: replaced silently
        raise
    if found is None or found[0].get("key") != key:
        return None
    try:
        data = json.loads(found[1].decode("utf-8"))
        return NoteGraph(_checked_concepts(data["concepts"]), _checked_neighbours(data["neighbours"]))
    except (ValueError, TypeError, KeyError, RecursionError) as error:  # a body of the wrong shape: damage
        raise CacheDamaged(f"{GRAPH_CACHE}: {type(error).__name__}: {error}"[:300]) from None


def _format_1(path: Path) -> bool:
    """A cache of a format before the magic line (plain JSON): an older vault2okf's, not damage."""
    try:
        with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as fh:
            return os.path.isfile(path) and fh.read(9) == b'{"key": ['
    except OSError:
        return False


def _checked_concepts(rows: Any) -> dict[str, Concept]:
    if not isinstance(rows, list):
        raise TypeError("concepts is not a list")
    concepts = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) == 10 and all(isinstance(v, str) for v in row[:5])):
            raise TypeError("a concept row is not five strings, aliases, a number, a date, tags and a date")
        aliases, number, date, tags, dated = row[5], row[6], row[7], row[8], row[9]
        for words, what in ((aliases, "aliases"), (tags, "tags")):
            if not isinstance(words, list) or not all(isinstance(a, str) for a in words):
                raise TypeError(f"the {what} of {row[0]!r} are not strings")
        if not (dated is None or isinstance(dated, str)):
            raise TypeError(f"the date of {row[0]!r} is not a string")
        if not (number is None or (isinstance(number, int) and not isinstance(number, bool))):
            raise TypeError(f"the session number of {row[0]!r} is not a whole number")
        if not (date is None or isinstance(date, str)):
            raise TypeError(f"the session date of {row[0]!r} is not a string")
        concepts[row[0]] = _concept(row)
    return concepts


def _checked_neighbours(found: Any) -> dict[str, dict[str, list[str]]]:
    if not isinstance(found, dict):
        raise TypeError("neighbours is not an object")
    for nbrs in found.values():
        if not isinstance(nbrs, dict):
            raise TypeError("a note's neighbours are not an object")
        for texts in nbrs.values():
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise TypeError("a link's sentences are not strings")
    return found


def _write_graph_cache(bundle: Path, key: list[int | str], graph: NoteGraph) -> None:
    import contextlib
    import json

    folder = state_dir(bundle)
    if not folder.is_dir():
        return  # not indexed: nothing of ours to put it beside
    concepts = [astuple(c) for c in graph.concepts.values()]  # a row as `_concept` reads it
    body = json.dumps({"concepts": concepts, "neighbours": graph.neighbours}, ensure_ascii=False)
    with contextlib.suppress(OSError, ValueError):  # read-only or full: the next search reads the database again
        write_cache(folder / GRAPH_CACHE, GRAPH_MAGIC, {"key": key}, body.encode("utf-8"))


def _concept(row: Sequence[Any]) -> Concept:
    """A concept from its row: ``graph_rows``' columns, or the same list in the cache."""
    return Concept(row[0], row[1], row[2], row[3], row[4], tuple(row[5]), row[6], row[7], tuple(row[8]), row[9])


def _graph(rows: list[tuple[Any, ...]], edges: list[tuple[Any, ...]]) -> NoteGraph:
    concepts = {r[0]: _concept(r) for r in rows}
    neighbours: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for source, target, context, source_title, target_title in edges:
        text = context or f"{source_title}: {target_title}"  # frontmatter links carry no sentence
        for a, b in ((source, target), (target, source)):
            if text not in neighbours[a][b]:
                neighbours[a][b].append(text)
    return NoteGraph(concepts, {k: dict(v) for k, v in neighbours.items()})
