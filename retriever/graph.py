"""The note graph from ``okf.duckdb``: concepts and undirected one-hop neighbours with the text that links them."""

from __future__ import annotations

import posixpath
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

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


def load_graph(bundle: Path) -> NoteGraph:
    rows, edges = graph_rows(bundle)
    concepts = {r[0]: Concept(r[0], r[1], r[2], r[3], r[4], tuple(r[5]), r[6], r[7]) for r in rows}
    neighbours: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for source, target, context, source_title, target_title in edges:
        text = context or f"{source_title}: {target_title}"  # frontmatter links carry no sentence
        for a, b in ((source, target), (target, source)):
            if text not in neighbours[a][b]:
                neighbours[a][b].append(text)
    return NoteGraph(concepts, {k: dict(v) for k, v in neighbours.items()})
