"""Which notes a text names: note titles and aliases found as whole words, case- and accent-insensitively.

Two uses in retrieval:
- a question that names a note (its title or an alias) gets that note among the seeds, so an exact name is
  never missed because its chunks embed poorly;
- the session notes that mention a seed note by name, even without a link, are offered to the hop in session
  order (temporal questions ask how something changed across sessions that often only *mention* it).

Names are matched as word sequences (``\\w+`` tokens after the text fold), so "Kanda" does not match
"Kandahar". A name shared by too many notes, or one that is a single short or very common word, is left out:
it would name half the vault.
"""

from __future__ import annotations

import contextlib
import json
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retriever.cachefile import CacheDamaged, read_cache, write_cache
from retriever.graph import NoteGraph

_WORD = re.compile(r"\w+")
MIN_CHARS = 4  # a one-word name shorter than this ("Ash", "Bo") is too likely to be an ordinary word
MAX_NOTES_PER_NAME = 3  # a name shared by more notes than this ("Overview", "Notes") names nothing in particular
COMMON = frozenset(
    """index readme overview notes note session sessions summary recap template untitled main home people places
    map maps party the and general misc other history background introduction todo""".split()  # noqa: SIM905
)


def fold_words(text: str) -> list[str]:
    """Words of ``text``, case-folded and without accents: the unit names are matched in."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _WORD.findall(plain)


@dataclass
class NameIndex:
    """Folded word sequences of note names -> the notes with that name."""

    notes_of: dict[tuple[str, ...], frozenset[str]]
    longest: int = field(init=False)

    def __post_init__(self) -> None:
        self.longest = max((len(k) for k in self.notes_of), default=0)

    @classmethod
    def from_graph(cls, graph: NoteGraph) -> NameIndex:
        named: dict[tuple[str, ...], set[str]] = defaultdict(set)
        for concept in graph.concepts.values():
            for name in {concept.title, *concept.aliases}:
                words = tuple(fold_words(name or ""))
                if _usable(words):
                    named[words].add(concept.id)
        return cls({k: frozenset(v) for k, v in named.items() if len(v) <= MAX_NOTES_PER_NAME})

    def find(self, text: str) -> dict[str, int]:
        """Notes named in ``text`` -> how many words the longest match had (longer names are surer)."""
        words = fold_words(text)
        found: dict[str, int] = {}
        for start in range(len(words)):
            for n in range(min(self.longest, len(words) - start), 0, -1):
                notes = self.notes_of.get(tuple(words[start : start + n]))
                if notes:
                    for note in notes:
                        found[note] = max(found.get(note, 0), n)
                    break  # the longest name starting here wins ("Old Tom Bell" over "Tom")
        return found


def _usable(words: tuple[str, ...]) -> bool:
    if not words or all(w.isdigit() for w in words):
        return False
    if len(words) == 1:
        return len(words[0]) >= MIN_CHARS and words[0] not in COMMON
    return not all(w in COMMON or w.isdigit() for w in words)


@dataclass
class SessionMentions:
    """For each note, the session notes that name it or link it, in session order."""

    sessions_of: dict[str, list[str]]
    position: dict[str, int]  # session id -> its place in session order

    @classmethod
    def build(cls, graph: NoteGraph, names: NameIndex, texts: Mapping[str, Iterable[str]]) -> SessionMentions:
        """``texts``: note id -> its chunk texts; only session notes are read."""
        sessions = sorted(
            (c for c in graph.concepts.values() if c.session_key is not None), key=lambda c: (c.session_key, c.id)
        )
        sessions_of: dict[str, list[str]] = defaultdict(list)
        for session in sessions:
            named = set(names.find("\n".join(texts.get(session.id, ()))))
            named |= set(graph.neighbours.get(session.id, {}))  # a link is a mention too
            for note in sorted(named - {session.id}):
                sessions_of[note].append(session.id)
        return cls(dict(sessions_of), {s.id: i for i, s in enumerate(sessions)})

    def sessions_naming(self, notes: Iterable[str]) -> list[str]:
        """Sessions naming any of ``notes``, each once, in session order."""
        found = {s for note in notes for s in self.sessions_of.get(note, ())}
        return sorted(found, key=self.position.__getitem__)


SESSION_MENTIONS_CACHE = "session-mentions.json"
SESSION_MENTIONS_MAGIC = b"vault2okf session mentions 1\n"


def load_session_mentions(path: Path, key: list[Any], limit: int) -> SessionMentions | None:
    """The session mentions cached at ``path`` for ``key``; None when there are none, they are of another key, or
    the file is not what ``save_session_mentions`` wrote (the caller builds them again and saves them over it)."""
    try:
        found = read_cache(path, SESSION_MENTIONS_MAGIC, limit)
    except CacheDamaged:
        return None
    if found is None or found[0].get("key") != key:
        return None
    try:
        data = json.loads(found[1].decode("utf-8"))
        sessions_of, position = data["sessions_of"], data["position"]
        if not (isinstance(sessions_of, dict) and isinstance(position, dict)):
            return None
        if not all(isinstance(v, list) and all(isinstance(s, str) for s in v) for v in sessions_of.values()):
            return None
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in position.values()):
            return None
        return SessionMentions(sessions_of, position)
    except (ValueError, TypeError, KeyError, RecursionError):
        return None


def save_session_mentions(path: Path, key: list[Any], mentions: SessionMentions) -> None:
    """Cache ``mentions`` at ``path`` for ``key``; nothing when it cannot be written (read-only, full)."""
    body = json.dumps({"sessions_of": mentions.sessions_of, "position": mentions.position}, ensure_ascii=False)
    with contextlib.suppress(OSError, ValueError):
        write_cache(path, SESSION_MENTIONS_MAGIC, {"key": key}, body.encode("utf-8"))


@dataclass
class MentionGraph:
    """Unlinked mentions as undirected edges: note -> the notes it names or that name it, without a link either way
    (``SearchSpec.mention_edges``)."""

    edges: dict[str, frozenset[str]]

    @classmethod
    def build(cls, graph: NoteGraph, names: NameIndex, texts: Mapping[str, Iterable[str]]) -> MentionGraph:
        """``texts``: note id -> its chunk texts (each opens with the note's own title, which names nothing new)."""
        edges: dict[str, set[str]] = defaultdict(set)
        for note, chunks in texts.items():
            linked = graph.neighbours.get(note, {})
            for named in names.find("\n".join(chunks)):
                if named != note and named not in linked:
                    edges[note].add(named)
                    edges[named].add(note)
        return cls({note: frozenset(found) for note, found in edges.items()})

    def of(self, note: str) -> frozenset[str]:
        return self.edges.get(note, frozenset())


_QUOTED = re.compile(r"\"([^\"]{2,80})\"|“([^”]{2,80})”")
_CAPITALISED = re.compile(r"[A-Z][\w'’-]*(?:\s+(?:of|the|de|du|von|van|la|le)?\s*[A-Z][\w'’-]*)*")
_NOT_NAMES = frozenset(
    """i a an the what who whom whose when where which why how did does do is are was were after before in on at
    from to of and or but if then once during since until between across over with by for my our we us me you your
    he she they his her their it its this that these those""".split()  # noqa: SIM905
)
_SENTENCE_END = re.compile(r"[.?!:;]\s+|[-–—]\s+")
_POSSESSIVE = re.compile(r"['’]s?$")
MAX_ENTITIES = 4


def entity_queries(question: str, names: NameIndex, titles: Mapping[str, str]) -> list[str]:
    """The question's quoted phrases, the titles of the notes it names, and its capitalised names (runs of
    capitalised words that are not question words), each once, at most ``MAX_ENTITIES`` (``SearchSpec.entities``)."""
    found: list[str] = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(question)]
    found = [_POSSESSIVE.sub("", f) for f in found]
    found += [titles[n] for n, _ in sorted(names.find(question).items(), key=lambda kv: -kv[1]) if n in titles]
    starts = {0} | {m.end() for m in _SENTENCE_END.finditer(question)}
    for match in _CAPITALISED.finditer(question):
        words = match.group(0).split()
        if match.start() in starts:  # a sentence's first word is capitalised whatever it is
            words = words[1:]
        while words and words[0].casefold() in _NOT_NAMES:
            words = words[1:]
        phrase = _POSSESSIVE.sub("", " ".join(words))
        if phrase and (len(words) > 1 or len(phrase) >= MIN_CHARS):
            found.append(phrase)
    seen: dict[str, str] = {}
    for phrase in found:
        seen.setdefault(" ".join(fold_words(phrase)), phrase.strip())
    return [p for key, p in seen.items() if key and key != " ".join(fold_words(question))][:MAX_ENTITIES]
