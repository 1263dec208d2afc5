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

from retriever.okf import analytics_rows, graph_rows


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
GRAPH_CACHE_FORMAT = 2  # 2: concepts carry tags and date


def load_graph(bundle: Path) -> NoteGraph:
    """The bundle's note graph: from ``.vault2okf/graph-cache.json`` while it was written from this very
    ``okf.duckdb`` (same size, modification time, inode and header; a convert swaps in a new file), else from
    the database, and then cached (when the bundle is writable). JSON, not a pickle: a bundle may come from
    someone else. A cold search on thellade spent ~0.2 s importing DuckDB and reading these rows; the cache
    reads in ~0.02 s."""
    key = _graph_key(bundle)
    cached = _read_graph_cache(bundle, key) if key else None
    if cached is not None:
        return cached
    graph = _graph(*graph_rows(bundle))
    if key:
        _write_graph_cache(bundle, key, graph)
    return graph


def _graph_key(bundle: Path) -> list[int | str] | None:
    import hashlib

    from retriever.okf import DATABASE, SCHEMA_VERSION

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
    import json

    try:
        data = json.loads((bundle / ".vault2okf" / GRAPH_CACHE).read_text(encoding="utf-8"))
        if data.get("key") != key:
            return None
        concepts = {c[0]: _concept(c) for c in data["concepts"]}
        neighbours = {a: {b: list(texts) for b, texts in nbrs.items()} for a, nbrs in data["neighbours"].items()}
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None  # missing or damaged: read the database instead
    return NoteGraph(concepts, neighbours)


def _write_graph_cache(bundle: Path, key: list[int | str], graph: NoteGraph) -> None:
    import contextlib
    import json

    folder = bundle / ".vault2okf"
    if not folder.is_dir():
        return  # not indexed: nothing of ours to put it beside
    concepts = [astuple(c) for c in graph.concepts.values()]  # a row as `_concept` reads it
    part = folder / f"{GRAPH_CACHE}.part-{os.getpid()}"
    with contextlib.suppress(OSError):  # read-only or full: the next search reads the database again
        try:
            text = json.dumps({"key": key, "concepts": concepts, "neighbours": graph.neighbours}, ensure_ascii=False)
            part.write_text(text, encoding="utf-8")
            os.replace(part, folder / GRAPH_CACHE)
        finally:
            part.unlink(missing_ok=True)


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
