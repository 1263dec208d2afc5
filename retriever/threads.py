"""Story threads across sessions: from the session notes a question reaches, the other sessions of the same series
that share the question's specific terms or the notes it names, in session order.

A story thread with no note of its own (a heist, a ritual told over three sessions) is described only in the
session notes, and is often named with a common word that many titles share, so the seeds go to the notes with
that word in their title and reach one of its sessions at best. Within one series (the session notes of a folder,
``NoteGraph.series_of``) the same word is rare, so it can lead from the session reached to the others.

The terms of a question: its words (``memory.words``), each pair of adjacent words (a *phrase*: a session holds
it only where the same two words are adjacent there too) and the notes it names (``NameIndex``) where a session
names or links them (``SessionMentions``). A term is *specific* to a series when at most half of its sessions
hold it, where its IDF (Robertson and Sparck Jones', within the series) is positive, so a series of three or four
sessions has none that two of them share; and it leads on only when a session the question reached holds it: the
step follows a thread out of the sessions reached, it does not search every session. Each other session of the
series scores the IDF of the specific terms it shares; the ``THREAD_MAX`` best are offered in session order.
"""

from __future__ import annotations

import math
import posixpath
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from retriever.graph import NoteGraph
from retriever.memory import pairs, words
from retriever.mentions import SessionMentions

THREAD_MAX = 3  # a thread told over three or four sessions: the one reached and three more


@dataclass(frozen=True)
class Terms:
    """What a session (or a question) can share: words, adjacent word pairs, notes named or linked."""

    words: frozenset[str]
    pairs: frozenset[str]
    notes: frozenset[str]

    @classmethod
    def of(cls, text: str, notes: Iterable[str] = ()) -> Terms:
        found = words(text)
        return cls(frozenset(found), frozenset(pairs(found)), frozenset(notes))

    def kinds(self) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        return self.words, self.pairs, self.notes


@dataclass
class SessionThreads:
    """Every session note's terms, to follow a question's thread through its series."""

    graph: NoteGraph
    terms: dict[str, Terms]  # session id -> its terms

    @classmethod
    def build(cls, graph: NoteGraph, mentions: SessionMentions, texts: Mapping[str, Iterable[str]]) -> SessionThreads:
        """``texts``: note id -> its chunk texts; only session notes are read."""
        named: dict[str, list[str]] = defaultdict(list)
        for note, sessions in mentions.sessions_of.items():
            for session in sessions:
                named[session].append(note)
        terms = {
            c.id: Terms.of("\n".join(texts.get(c.id, ())), named.get(c.id, ()))
            for c in graph.concepts.values()
            if c.session_key is not None
        }
        return cls(graph, terms)

    def follow(self, question: Terms, reached: Iterable[str]) -> list[str]:
        """The sessions that carry on the question's thread from the ``reached`` sessions, in session order."""
        reached = [s for s in reached if s in self.terms]
        scores: dict[str, float] = {}
        for series in {tuple(self.graph.series_of(s)) for s in reached}:
            for session, score in self._shared(question, list(series), set(reached)).items():
                scores[session] = scores.get(session, 0.0) + score
        best = sorted(scores, key=lambda s: (-scores[s], self._place(s)))[:THREAD_MAX]
        return sorted(best, key=self._place)

    def _shared(self, question: Terms, series: list[str], reached: set[str]) -> dict[str, float]:
        """Each unreached session of ``series`` -> the IDF of the specific terms it shares with the question."""
        scores: dict[str, float] = defaultdict(float)
        for kind, asked in enumerate(question.kinds()):
            for term in sorted(asked):
                holders = [s for s in series if term in self.terms[s].kinds()[kind]]
                idf = _idf(len(series), len(holders))
                if idf <= 0 or not reached.intersection(holders):
                    continue
                for session in holders:
                    if session not in reached:
                        scores[session] += idf
        return dict(scores)

    def _place(self, session: str) -> tuple[tuple[str, int], str]:
        key = self.graph.concepts[session].session_key
        return (key or ("", -1), session)


def _idf(n: int, df: int) -> float:
    """Robertson and Sparck Jones' IDF of a term ``df`` of ``n`` documents hold: positive below half of them."""
    return math.log((n - df + 0.5) / (df + 0.5))


RUN_GAP = 5  # sessions two seed sessions may lie apart for the ones between to be a run (runs of 3 to 6)
RUN_MAX = 6  # sessions of a run offered, at most (those naming most of what the two ends share)
TWIN_OVERLAP = 0.25  # two series tell the same sessions when their same-numbered sessions share this much


def parallel_series(graph: NoteGraph, named_in: Mapping[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """Session folder -> the folders telling the same sessions (itself included): two series are parallel when
    their sessions of the same session key (date, number) name mostly the same notes (median Jaccard of at least
    ``TWIN_OVERLAP`` over two or more such pairs), as a player's notes and the GM's recaps do; several campaigns
    numbering their own sessions from 1 are not (their sessions name other people)."""
    by_key: dict[tuple[str, int], list[str]] = defaultdict(list)
    for c in graph.concepts.values():
        if c.session_key is not None:
            by_key[c.session_key].append(c.id)
    overlaps: dict[tuple[str, str], list[float]] = defaultdict(list)
    for notes in by_key.values():
        for i, a in enumerate(notes):
            for b in notes[i + 1 :]:
                fa, fb = sorted((_folder(graph, a), _folder(graph, b)))
                x, y = named_in.get(a, frozenset()), named_in.get(b, frozenset())
                if fa != fb and x | y:  # two sessions naming nothing say nothing
                    overlaps[(fa, fb)].append(len(x & y) / len(x | y))
    group: dict[str, set[str]] = {}
    for (fa, fb), found in sorted(overlaps.items()):
        if len(found) >= 2 and sorted(found)[len(found) // 2] >= TWIN_OVERLAP:
            joined = group.get(fa, {fa}) | group.get(fb, {fb})
            for folder in joined:
                group[folder] = joined
    return {folder: frozenset(members) for folder, members in group.items()}


def _folder(graph: NoteGraph, note: str) -> str:
    return posixpath.dirname(graph.concepts[note].vault_path)


def session_runs(
    graph: NoteGraph,
    named_in: Mapping[str, frozenset[str]],
    seeds: Iterable[str],
    asked: Iterable[str] = (),
    parallel: Mapping[str, frozenset[str]] | None = None,
    adjacent: bool = False,
) -> list[str]:
    """The sessions between two seed sessions of one timeline (consecutive among the seeds' sessions, at most
    ``RUN_GAP`` apart; with ``adjacent``, next to each other too: a run of two, whose tellings in a parallel
    series are offered) that name a note both ends name, or one the question names (``asked``): the run's people,
    places and objects; the ``RUN_MAX`` naming most of them, in session order (``SearchSpec.runs``). A timeline is a
    series (the session notes of one folder) and the series ``parallel`` to it (``parallel_series``): sessions are
    placed by session key across them, so a player's notes and the GM's recaps of the same sessions are both
    offered, and the ends' own sessions in the other series too (first: they tell the run's ends); the series
    holding more seeds first on a tie. ``named_in``: session -> the notes it names or links."""
    parallel = parallel or {}
    seeds = [s for s in seeds if graph.concepts.get(s) and graph.concepts[s].session_key is not None]
    timelines: dict[frozenset[str], list[str]] = defaultdict(list)
    for s in seeds:
        folder = _folder(graph, s)
        timelines[parallel.get(folder, frozenset({folder}))].append(s)
    held: dict[str, int] = defaultdict(int)
    for s in seeds:
        held[_folder(graph, s)] += 1
    asked = frozenset(asked)
    scores: dict[str, tuple[int, int]] = {}
    for folders, ends_of in timelines.items():
        at: dict[tuple[str, int], list[str]] = defaultdict(list)
        for c in graph.concepts.values():
            if c.session_key is not None and posixpath.dirname(c.vault_path) in folders:
                at[c.session_key].append(c.id)
        keys = sorted(at)
        place = {key: i for i, key in enumerate(keys)}
        ends = sorted({place[graph.concepts[s].session_key] for s in ends_of})  # type: ignore[index]
        for a, b in zip(ends, ends[1:], strict=False):
            if not (0 if adjacent else 1) < b - a <= RUN_GAP:
                continue
            left = frozenset().union(*(named_in.get(s, frozenset()) for s in at[keys[a]]))
            right = frozenset().union(*(named_in.get(s, frozenset()) for s in at[keys[b]]))
            cast = frozenset(n for n in (left & right) | asked
                             if graph.concepts.get(n) and graph.concepts[n].session_key is None)  # fmt: skip
            for i in range(a, b + 1):  # the ends too: the same session told in a parallel series
                for between in at[keys[i]]:
                    shared = len(named_in.get(between, frozenset()) & cast) if a < i < b else len(cast)
                    if shared and between not in seeds:
                        scores[between] = max(scores.get(between, (0, 0)), (shared, held[_folder(graph, between)]))
    best = sorted(scores, key=lambda s: (-scores[s][0], -scores[s][1], s))[:RUN_MAX]
    return sorted(best, key=lambda s: (graph.concepts[s].session_key or ("", -1), s))
