"""What a broken link probably meant, and names the vault spells several ways. Pure, no I/O.

``Suggester.suggest(target)`` ranks notes by how well their title, an alias, or (as a tie-breaker) their
folder words match the link, and says why:
- *same name*: equal once case, accents, apostrophes, punctuation, spacing and a leading "the" are ignored
  (``FatherKenichi`` = ``Father Kenichi``, ``./People's Engine`` = ``The People's Engine``);
- *edit distance*: the name, without spaces, within 1 edit (2 from 10 letters, 3 from 16), transpositions
  counting one (``Order of Silent Echoes`` ~ ``Order of Silent Echos``);
- *same words*: the words of the link and of the name overlap, each word weighted by how rare it is among
  note names; a word may match a spelling variant of itself (``Kabuki Theatre`` ~ ``Kabuki``).
A suggestion is *confident* when it scores 0.8 or more and no other note comes within 0.1 of it: that is
what ``vault2okf links --overrides`` writes as a live override; the rest are written commented out.

``spelling_variants`` finds words that the notes' text writes close to a word of a note title
(``Yagra`` for ``Ygra``, ``Kaleor`` for ``Kaelor``, ``Grieves`` and ``Greave`` for ``Greaves``), kept only
when the variant stands next to another word of that title, or in a broken link, so ordinary words are not
taken for names; each cluster suggests aliases (the title with the variant spelling) seen in the vault.
"""

from __future__ import annotations

import itertools
import marshal
import math
import posixpath
import re
import sys
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

Named = dict[str, tuple[tuple[str, ...], tuple[str, ...]]]  # a name -> its words, and those of 4 letters or more
STOPWORDS = frozenset({"the", "a", "an", "of", "and", "de", "la", "le", "in", "on", "at", "to", "for"})
CONFIDENT = 0.8
MARGIN = 0.1
SHOWN = 5
LONGEST = 40  # names and words longer than this are matched by their words, not by edit distance
POOL = 200  # a word shared by more names than this does not bring candidates on its own
_APOSTROPHES = re.compile(r"['’‘`´]")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_WORD = re.compile(r"[^\W_]+")
_CAPITAL_RUN = re.compile(r"[A-Z][a-z’']{2,}(?:[ \t*_]+[A-Z][a-z’']{2,})*")  # runs of capitalised words
_POSSESSIVE = re.compile(r"['’]s?$")
_RUN_SPLIT = re.compile(r"[ \t*_]+")
_LOWER_WORD = re.compile(r"\b[a-z]{4,}\b")


def fold(text: str) -> str:
    """Case, accents, apostrophes dropped; camelCase split; punctuation to spaces: ``Caf'é_Noir`` -> ``cafe noir``."""
    text = _CAMEL.sub(" ", _APOSTROPHES.sub("", text))
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return " ".join(_WORD.findall(text.casefold()))


def words(text: str) -> tuple[str, ...]:
    """The folded words of ``text`` that carry meaning (not "the", "of", ...); all words if that is none."""
    every = tuple(fold(text).split())
    content = tuple(w for w in every if w not in STOPWORDS)
    return content or every


def distance(a: str, b: str, limit: int) -> int:
    """Damerau-Levenshtein distance (optimal string alignment) of ``a`` and ``b``, or ``limit + 1`` once it
    exceeds ``limit``; a band of width ``limit`` keeps it O(len * limit)."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    if a == b:
        return 0
    big = limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [big] * (len(b) + 1)
        cur[0] = i
        lo, hi = max(1, i - limit), min(len(b), i + limit)
        for j in range(lo, hi + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            best = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                best = min(best, prev2[j - 2] + 1)
            cur[j] = best
        if min(cur[lo : hi + 1]) > limit:
            return big
        prev2, prev = prev, cur
    return min(prev[len(b)], big)


def allowed_edits(key: str) -> int:
    """Edits that still count as a misspelling of a name of ``len(key)`` letters (0 below 5 letters)."""
    n = len(key)
    return 0 if n < 5 else 1 if n < 10 else 2 if n < 16 else 3


class _Deletions:
    """Words indexed by themselves with up to one letter deleted: two words that share a key are within two
    edits (``greaves`` and ``grieves`` share ``greves``), so a lookup never scans the whole vocabulary."""

    def __init__(self, vocabulary: Iterable[str]) -> None:
        self.keys: dict[str, set[str]] = defaultdict(set)
        for word in vocabulary:
            if len(word) > LONGEST:  # memory stays linear in the vocabulary; long names match by words
                continue
            for key in _deletes(word):
                self.keys[key].add(word)

    def near(self, word: str, limit: int) -> list[tuple[int, str]]:
        if len(word) > LONGEST:
            return []
        found = {w for key in _deletes(word) for w in self.keys.get(key, ())}
        scored = ((distance(word, w, limit), w) for w in found if w != word)
        return sorted((d, w) for d, w in scored if d <= limit)


def _deletes(word: str) -> set[str]:
    return {word, *(word[:i] + word[i + 1 :] for i in range(len(word)))}


@dataclass(frozen=True)
class Suggestion:
    path: str  # vault path of the note
    name: str  # the title or alias that matched
    why: str
    score: float
    confident: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name, "why": self.why, "score": round(self.score, 3),
                "confident": self.confident}  # fmt: skip


@dataclass(frozen=True)
class _Name:
    """A name a link may have meant: a note's title or alias, as words and as one key."""

    path: str
    name: str
    alias: bool
    words: tuple[str, ...]
    key: str  # the words joined, no spaces
    folder_words: frozenset[str]


class Suggester:
    def __init__(
        self,
        notes: Sequence[str],
        aliases: Mapping[str, Sequence[str]] | None = None,
        variants: Mapping[str, str] | None = None,
    ) -> None:
        """``variants`` maps a folded variant spelling to the title word it spells (``grieves`` -> ``greaves``)."""
        self.names: list[_Name] = []
        for path in sorted(notes):
            stem = posixpath.basename(path)[:-3] if path.lower().endswith(".md") else posixpath.basename(path)
            folder = frozenset(words(posixpath.dirname(path).replace("/", " ")))
            self.names += [_entry(path, stem, False, folder)]
            self.names += [_entry(path, a, True, folder) for a in (aliases or {}).get(path, ())]
        self.names = [n for n in self.names if n.key]
        self.by_word: dict[str, list[int]] = defaultdict(list)
        self.by_key: dict[str, list[int]] = defaultdict(list)
        for i, n in enumerate(self.names):
            for w in set(n.words):
                self.by_word[w].append(i)
            self.by_key[n.key].append(i)
        self.keys = _Deletions(self.by_key)
        self.vocab = _Deletions(self.by_word)
        total = max(len(self.names), 1)
        self.weight = {w: math.log(1 + total / len(ids)) for w, ids in self.by_word.items()}
        self.variants = dict(variants or {})

    def suggest(self, target: str) -> list[Suggestion]:
        folder, _, base = target.strip().rstrip("/").rpartition("/")
        link = words(base)
        key = "".join(link)
        if not key:
            return []
        best: dict[str, tuple[float, str, str]] = {}

        def offer(i: int, score: float, why: str) -> None:
            n = self.names[i]
            if n.alias:
                score, why = score * 0.95, f"alias '{n.name}': {why}"
            if folder and n.folder_words & set(words(folder.replace("/", " "))):
                score, why = min(score + 0.05, 1.0), f"{why}; in a folder named like the link's"
            score = round(score, 9)  # scores equal but for float rounding tie, and ties go by path
            if score > best.get(n.path, (0.0, "", ""))[0]:
                best[n.path] = (score, n.name, why)

        for i in self.by_key.get(key, ()):
            offer(i, 1.0, "same name apart from case, accents, punctuation, spacing or a leading 'the'")
        limit = allowed_edits(key)
        for d, other in self.keys.near(key, limit) if limit else ():
            for i in self.by_key[other]:  # one letter off a short name is as likely another name: not confident
                offer(i, (0.92 if len(key) >= 7 else 0.75) - 0.07 * d, f"edit distance {d}")
        matches = {w: self._word_matches(w) for w in dict.fromkeys(link)}
        pools = [self.by_word[nw] for found in matches.values() for _, nw in found]
        candidates = {i for ids in pools if len(ids) <= POOL for i in ids}  # a common word alone is no evidence
        for i in candidates:
            scored = self._by_words(link, matches, self.names[i])
            if scored:
                offer(i, *scored)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[:SHOWN]
        out = [Suggestion(p, name, why, score) for p, (score, name, why) in ranked if score >= 0.3]
        if out and out[0].score >= CONFIDENT and (len(out) == 1 or out[1].score <= out[0].score - MARGIN):
            out[0] = Suggestion(out[0].path, out[0].name, out[0].why, out[0].score, True)
        return out

    def _word_matches(self, word: str) -> list[tuple[str, str]]:
        """(how, name word) for each note-name word this link word may be: itself, a variant, a misspelling."""
        found = [("", word)] if word in self.by_word else []
        if self.variants.get(word) in self.by_word:
            found.append((f"'{word}' is how the vault also spells '{self.variants[word]}'", self.variants[word]))
        limit = min(allowed_edits(word), 1)
        found += [(f"'{word}' ~ '{w}'", w) for _, w in (self.vocab.near(word, limit) if limit else ())]
        return found

    def _by_words(
        self, link: tuple[str, ...], matches: dict[str, list[tuple[str, str]]], name: _Name
    ) -> tuple[float, str] | None:
        own = set(name.words)
        unique = tuple(dict.fromkeys(link))  # the link's words in its order: sums and texts never in set order
        hit: dict[str, tuple[str, str]] = {}
        for w in unique:
            for how, name_word in matches[w]:
                if name_word in own:
                    hit[w] = (how, name_word)
                    break
        if not hit:
            return None
        used = {nw for _, nw in hit.values()}
        weight = self.weight
        cover_link = sum(weight.get(hit[w][1], 1.0) for w in unique if w in hit)
        cover_link /= sum(weight.get(hit[w][1], 1.0) if w in hit else weight.get(w, 3.0) for w in unique)
        distinct = tuple(dict.fromkeys(name.words))
        cover_name = sum(weight[w] for w in distinct if w in used) / sum(weight[w] for w in distinct)
        spelled = "; ".join(how for how, _ in hit.values() if how)
        spelled = f" ({spelled})" if spelled else ""
        if cover_link == 1 and cover_name == 1:
            misspelt = any("~" in how for how, _ in hit.values())  # a short name one letter off: maybe another
            score = 0.85 if not misspelt else 0.82 if len("".join(link)) >= 7 else 0.7
            return score, f"same words{spelled}"
        extra_name = ", ".join(sorted(own - used))
        extra_link = ", ".join(sorted(set(unique) - set(hit)))
        if cover_link == 1:
            return (
                0.45 + 0.35 * cover_name,
                f"every word of the link is in the name, which adds '{extra_name}'{spelled}",
            )
        if cover_name == 1:
            return 0.45 + 0.3 * cover_link, f"every word of the name is in the link, which adds '{extra_link}'{spelled}"
        shared = ", ".join(sorted(used))
        rare = any(len(self.by_word[w]) <= 5 for w in used)  # a word few names share says more
        score = 0.25 + 0.4 * math.sqrt(cover_link * cover_name) if rare else 0.5 * cover_link * cover_name
        return score, f"same words: {shared}{spelled}"


class _Near:
    """``_Deletions(vocabulary).near`` through a memo, the index built only when the memo lacks a word. ``keep``: the
    memo keeps what it holds and gains the words looked up now (an update looks up the words it touches alone);
    else it is refilled with the words looked up this time only."""

    def __init__(
        self,
        vocabulary: Iterable[str],
        memo: dict[tuple[str, int], list[tuple[int, str]]],
        keep: bool = False,
        index: _Deletions | None = None,
    ) -> None:
        self.vocabulary, self.known = vocabulary, memo if keep else dict(memo)
        self.memo = memo
        if not keep:
            memo.clear()
        self.index = index

    def near(self, word: str, limit: int) -> list[tuple[int, str]]:
        found = self.known.get((word, limit))
        if found is None:
            self.index = self.index or _Deletions(self.vocabulary)
            found = self.index.near(word, limit)
        self.memo[(word, limit)] = found
        return found


def _entry(path: str, name: str, alias: bool, folder: frozenset[str]) -> _Name:
    found = words(name)
    return _Name(path, name, alias, found, "".join(found), folder)


@dataclass(frozen=True)
class _Seen:
    count: Counter[str]  # word -> times written
    beside: dict[str, Counter[str]]  # word -> capitalised words written next to it


@dataclass(frozen=True, eq=False)
class BodyWords:
    """What ``spelling_variants`` reads from one note's body, kept by the convert cache per note."""

    runs: Counter[str]  # runs of capitalised words -> times written
    lower: frozenset[str]  # words written in lower case

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BodyWords):
            return NotImplemented
        return self is other or (self.runs == other.runs and self.lower == other.lower)

    def saved(self) -> bytes:
        """As the convert cache keeps them: one marshalled value (``StoredWords`` reads it back when first asked)."""
        return marshal.dumps((dict(self.runs), self.lower))


class StoredWords(BodyWords):
    """A note's ``BodyWords`` as the convert cache saved them, decoded when first read: a convert that starts from
    the cache decodes the words of the notes that changed, not every note's (at 13k notes, half a second of the
    cache's decoding). Equal to the words it was saved from."""

    blob: bytes

    def __init__(self, blob: bytes) -> None:  # the dataclass's fields are read from ``blob`` when first asked for
        object.__setattr__(self, "blob", blob)

    def __getattr__(self, name: str) -> Any:
        if name not in ("runs", "lower"):
            raise AttributeError(name)
        try:
            runs, lower = marshal.loads(self.blob)
            runs, lower = Counter(runs), frozenset(lower)
        except Exception as error:  # noqa: BLE001 - a wrong shape: the cache that held it is damaged
            raise WordsDamaged(f"a note's saved words: {type(error).__name__}: {error}") from error
        object.__setattr__(self, "runs", runs)
        object.__setattr__(self, "lower", lower)
        return runs if name == "runs" else lower

    def saved(self) -> bytes:
        return self.blob


class WordsDamaged(Exception):
    """Saved words (``StoredWords``) that do not decode: the cache that held them is not what a convert wrote."""


def body_words(body: str) -> BodyWords:
    """Interned: the convert cache holds each word once, however many notes write it."""
    runs = Counter({sys.intern(run): n for run, n in Counter(_CAPITAL_RUN.findall(body)).items()})
    return BodyWords(runs, frozenset(map(sys.intern, set(_LOWER_WORD.findall(body)))))


def spelling_variants(
    notes: Sequence[Any],
    aliases: Mapping[str, Sequence[str]],
    records: Sequence[Any],
    words: Mapping[str, BodyWords] | Sequence[BodyWords] | None = None,
    near: dict[tuple[str, int], list[tuple[int, str]]] | None = None,
    tally: TallyBox | None = None,
    named: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
    broken: Counter[str] | None = None,
) -> list[dict[str, Any]]:
    """Clusters ``{word, variants: {spelling: count}, notes: [paths], aliases: [{note, alias}]}``.

    ``notes`` are parsed notes (``.path``, ``.body``; only ``.path`` for a note in ``words``, its
    ``body_words``, or for every note where ``words`` is a list of theirs in the notes' order), ``records`` the
    resolved links (broken targets count as written spellings too), or ``broken``: the broken links' targets
    counted (``broken_targets``), then ``records`` is not read. ``near``
    holds the title words near each word looked up, filled as they are found: valid while the notes and
    aliases are the same (the convert cache keeps it). ``tally``: the last run's sum of the notes' runs, taken
    (moved to these notes' words where it can be) and replaced by this run's (``Tally``; a watcher keeps it); where
    it was moved, the clusters the last run found (``Clusters``, kept with it) are updated for the words whose
    counts or neighbours changed alone. ``named``: each name's words (``_name_words``) as the last run found them,
    refilled with this run's names (the convert cache keeps it: a fresh process folds only the names it lacks, not
    13k titles)."""
    if isinstance(words, Sequence):  # every note's, in the notes' order
        read = list(words)
    else:
        read = [words[n.path] if words is not None and n.path in words else body_words(n.body) for n in notes]
    summed = _tallied(notes, read, tally)
    last, touched = summed.clusters, summed.touched
    summed.clusters, summed.touched = None, set()  # put back once these clusters are found: never half-made ones
    named = {} if named is None else named
    last = last if last is not None and last.aliases == aliases else None  # the tally's paths: the same notes
    title_words: Any
    if last is not None and last.names is not None:  # a watcher's: the names as the last run made them
        titles, (title_words, was) = last.titles, last.names
        if was is not named:
            named.clear()
            named.update(was)
    elif last is not None:  # restored from the cache, with ``named`` (these notes' names: the same notes, aliases)
        titles, title_words = last.titles, _TitleWords(aliases, named)
    else:
        titles, title_words = _titles(notes, aliases, named)
    seen = summed.seen
    if broken is None:
        broken = broken_targets(r.link.target for r in records if r.resolution.status == "broken")
    index = _Near(titles, {} if near is None else near, keep=last is not None)
    if last is None:
        clusters: dict[str, Counter[str]] = defaultdict(Counter)
        for word, count in (seen.count + broken).items():
            for title_word in _joins(word, count, broken, seen, titles, title_words, index):
                clusters[title_word][word] += count
    else:
        if broken is not last.broken:  # the very words of last time where no broken link changed
            touched = touched | {w for w in broken.keys() | last.broken.keys() if broken.get(w) != last.broken.get(w)}
        clusters = _updated(last.clusters, touched, broken, last.broken, seen, titles, title_words, index)
    placed = last.placed if last is not None else None  # the very titles: saved as last time
    summed.clusters = Clusters(dict(aliases), broken, clusters, titles, (title_words, named), placed)
    return _clusters_out(clusters, titles, title_words, seen, broken, summed.lower)


def broken_targets(targets: Iterable[str]) -> Counter[str]:
    """The words of broken links' targets (as many times as they are written), in the order links first write
    them: what ``spelling_variants`` counts as written spellings besides the notes' text."""
    broken: Counter[str] = Counter()  # each target folded once (6k broken links, 400 targets at 13k notes)
    for target, times in Counter(targets).items():
        for w in fold(target).split():
            broken[w] += times
    return broken


def _titles(
    notes: Sequence[Any], aliases: Mapping[str, Sequence[str]], named: Named
) -> tuple[dict[str, set[str]], dict[str, list[tuple[str, ...]]]]:
    """Each title word's notes, and each note's names as words; ``named`` refilled with these names' words."""
    titles: dict[str, set[str]] = defaultdict(set)  # title word -> note paths
    title_words: dict[str, list[tuple[str, ...]]] = defaultdict(list)  # note path -> the words of its names
    known = dict(named)
    named.clear()
    for note in notes:
        stem = note.path.rpartition("/")[2][:-3]  # posixpath.basename, without its checks: 13k times
        for name in (stem, *aliases.get(note.path, ())):
            pair = known.get(name)
            every, found = named[name] = pair if pair is not None else _name_words(name)
            title_words[note.path].append(every)
            for w in found:
                titles[w].add(note.path)
    return titles, title_words


def _joins(
    word: str,
    count: int,
    broken: Counter[str],
    seen: _Seen,
    titles: Mapping[str, set[str]],
    title_words: Mapping[str, list[tuple[str, ...]]],
    index: _Near,
) -> list[str]:
    """The title words ``word`` (written ``count`` times) is taken for a spelling of: near one, with its first
    letter, in a broken link written more than once or next to another word of that title."""
    if word in titles or len(word) < 4:
        return []
    found = []
    for _, title_word in index.near(word, 1 if len(word) < 7 else 2):
        if word[0] != title_word[0]:
            continue
        in_link = broken[word] and len(word) >= 6 and count >= 2  # written so more than once, in a link
        if in_link or _beside_title(word, title_word, seen, titles, title_words, index):
            found.append(title_word)
    return found


def _updated(
    clusters: Mapping[str, Counter[str]],
    touched: set[str],
    broken: Counter[str],
    last_broken: Counter[str],
    seen: _Seen,
    titles: Mapping[str, set[str]],
    title_words: Mapping[str, list[tuple[str, ...]]],
    index: _Near,
) -> dict[str, Counter[str]]:
    """The last clusters with each ``touched`` word (its count, its neighbours or its broken links changed) taken
    out and put back where ``_joins`` says now. Every other word's clusters are as before: they depend on its count,
    its neighbours and the titles alone. Each cluster's words stay in the order a full run adds them (the order of
    ``seen.count + broken``: the seen words' order is the moved tally's, the same; the words of broken links
    alone may come in another order, and then every cluster is put in order again)."""
    out = {t: c for t, c in clusters.items() if not touched.intersection(c)}  # the very Counters, where untouched
    redo = {t: Counter({w: n for w, n in c.items() if w not in touched}) for t, c in clusters.items() if t not in out}
    added: set[str] = set()
    for word in touched:
        count = seen.count[word] + broken[word] if word in seen.count or word in broken else 0
        if count <= 0:
            continue
        for title_word in _joins(word, count, broken, seen, titles, title_words, index):
            if title_word in out:
                redo[title_word] = Counter(out.pop(title_word))
            redo.setdefault(title_word, Counter())[word] = count
            added.add(title_word)
    if [w for w in broken if w not in seen.count] != [w for w in last_broken if w not in seen.count]:
        redo.update((t, Counter(c)) for t, c in out.items())
        out.clear()
        added.update(redo)
    if added:  # a word joined: its cluster's words put in the order of a full run
        order = {w: i for i, w in enumerate(itertools.chain(seen.count, (w for w in broken if w not in seen.count)))}
        for title_word in added:
            redo[title_word] = Counter(dict(sorted(redo[title_word].items(), key=lambda kv: order[kv[0]])))
    out.update((t, c) for t, c in redo.items() if c)
    return out


def _clusters_out(
    clusters: Mapping[str, Counter[str]],
    titles: Mapping[str, set[str]],
    title_words: Mapping[str, list[tuple[str, ...]]],
    seen: _Seen,
    broken: Counter[str],
    lower: Counter[str],
) -> list[dict[str, Any]]:
    """``spelling_variants``' clusters from what ``_joins`` found: a word also written in lower case dropped, each
    with its notes and the aliases seen."""
    kept_words = {}
    for title_word, spellings in clusters.items():  # a word also written in lower case is a word, not a name (people)
        left = Counter({w: n for w, n in spellings.items() if w not in lower})
        if left:
            kept_words[title_word] = left
    out = []
    for title_word, spellings in sorted(kept_words.items()):
        paths = sorted(titles[title_word])
        aliases_seen = [
            {"note": p, "alias": a} for p in paths for a in _aliases(title_words[p], kept_words, seen, broken)
        ]
        used = {w for a in aliases_seen for w in fold(a["alias"]).split()}
        kept = {w: n for w, n in spellings.items() if w in used or not _plural(w, title_word)}
        if kept:  # a plural (hounds, Chancellors) is kept only where it spells a title (Harlon Greave)
            out.append({
                "word": title_word,
                "variants": dict(sorted(kept.items(), key=lambda kv: (-kv[1], kv[0]))),
                "notes": paths,
                "aliases": aliases_seen,
            })  # fmt: skip
    return out


@lru_cache(maxsize=1 << 16)
def _name_words(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A title's or alias's folded words, and those of 4 letters or more (a bounded memo: the same names come
    back at each convert of a watcher)."""
    every = tuple(fold(_POSSESSIVE.sub("", w)) for w in name.split())  # "Arcanist's" is "arcanist"
    every = tuple(w for w in every if w)
    return every, tuple(w for w in every if len(w) >= 4)


def _plural(a: str, b: str) -> bool:
    return a + "s" == b or b + "s" == a


def variant_map(clusters: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return {v: c["word"] for c in clusters for v in c["variants"]}


def _seen_words(runs: Counter[str]) -> _Seen:
    count: Counter[str] = Counter()
    beside: dict[str, Counter[str]] = defaultdict(Counter)
    folded: dict[str, str] = {}
    for run, times in runs.items():  # each distinct run once: names repeat
        _add_run(_run_words(run, folded), times, count, beside)
    return _Seen(count, beside)


def _run_words(run: str, folded: dict[str, str]) -> list[str]:
    found = []
    for w in _RUN_SPLIT.split(run):
        if w not in folded:
            folded[w] = fold(_POSSESSIVE.sub("", w))
        if folded[w] and " " not in folded[w]:
            found.append(folded[w])
    return found


def _add_run(found: list[str], times: int, count: Counter[str], beside: dict[str, Counter[str]]) -> None:
    for w in found:
        count[w] += times
    for a, b in itertools.pairwise(found):
        beside[a][b] += times
        beside[b][a] += times


@dataclass
class Clusters:
    """What ``spelling_variants`` found before dropping the words written in lower case, kept with the ``Tally`` it
    was found from so that the next run (the tally moved on) looks again at the words it touched alone: the aliases
    (the notes are the tally's), the broken links' words counted, each title word's variants (``_joins``), in the
    order a full run adds them, and each title word's notes (``titles``, saved by their places among the tally's
    notes). In memory only: each note's names as words (``_titles``), and the ``named`` they were made with."""

    aliases: dict[str, Sequence[str]]
    broken: Counter[str]
    clusters: dict[str, Counter[str]]
    titles: dict[str, set[str]]
    names: tuple[Any, Named] | None = None  # each note's names as words, a mapping; the names' words they came from
    placed: dict[str, list[int]] | None = None  # ``titles`` as saved, while the titles are the very ones

    def saved(self, paths: Sequence[str]) -> tuple[Any, ...]:
        """As built-in values (``restored``): the convert cache keeps them with the tally of the notes ``paths``."""
        if self.placed is None:
            place = {p: i for i, p in enumerate(paths)}
            self.placed = {w: sorted(place[p] for p in found) for w, found in self.titles.items()}
        return (
            {p: list(a) for p, a in self.aliases.items()},
            dict(self.broken),
            {t: dict(c) for t, c in self.clusters.items()},
            self.placed,
        )

    @classmethod
    def restored(cls, saved: Any, paths: Sequence[str]) -> Clusters:
        aliases, broken, clusters, placed = saved
        titles = {w: {paths[i] for i in found} for w, found in placed.items()}
        return cls({p: tuple(a) for p, a in aliases.items()}, Counter(broken),
                   {t: Counter(c) for t, c in clusters.items()}, titles, placed=placed)  # fmt: skip


class _TitleWords:
    """Each note's names as words (``_titles``' second half), made when first asked for from the names' words in
    ``named``: a fresh process that restored its clusters reads those of a few notes, not of 13k."""

    def __init__(self, aliases: Mapping[str, Sequence[str]], named: Named) -> None:
        self.aliases, self.named = aliases, named
        self.made: dict[str, list[tuple[str, ...]]] = {}

    def __getitem__(self, path: str) -> list[tuple[str, ...]]:
        found = self.made.get(path)
        if found is None:
            names = (path.rpartition("/")[2][:-3], *self.aliases.get(path, ()))
            found = self.made[path] = [(self.named.get(n) or _name_words(n))[0] for n in names]
        return found


MOST_CHANGED = 16  # notes whose words changed beyond which a Tally is made again rather than updated


class Tally:
    """The vault's capitalised runs (each note's ``BodyWords.runs`` summed, in the order a full sum has them) and
    the words seen in them (``_Seen``), and how many notes write each word in lower case (``lower``), for a
    watcher's next ``spelling_variants`` to update rather than sum again.

    An update keeps every key in its place: it is taken only where the notes are the same paths, few notes'
    words changed, no run appears or disappears in the sum, and a run a changed note was the first to write is
    still written first by it, in the same order; then each changed run's count moves, and the seen words'
    counts with it. Anything else: summed again, as without a tally. One tally serves one convert: updating it
    hands it on (``spent``), so a convert that fails never leaves a half-moved one behind. Only the changed
    notes' words are read (``BodyWords.__eq__`` aside, the others are the very objects of last time)."""

    def __init__(self, paths: list[str], read: list[BodyWords]) -> None:
        self.paths, self.read = paths, read
        self.runs: Counter[str] = Counter()
        self.lower: Counter[str] = Counter()
        self.first: dict[str, int] = {}
        for i, one in enumerate(read):
            for run in one.runs:
                self.first.setdefault(run, i)
            self.runs.update(one.runs)
            self.lower.update(one.lower)
        self.seen = _seen_words(self.runs)
        self.spent = False
        self.updates = 0  # how many converts in a row moved it rather than made it again
        self.clusters: Clusters | None = None  # spelling_variants' clusters found from these sums
        self.touched: set[str] = set()  # the seen words whose count or neighbours moved since those clusters

    def moved(self, paths: list[str], read: list[BodyWords]) -> Tally | None:
        """This tally moved to ``read`` (same ``paths``), or None where it cannot keep every key in place."""
        if self.spent or paths != self.paths:
            return None
        changed = [i for i, (a, b) in enumerate(zip(self.read, read, strict=True)) if a is not b and a != b]
        if len(changed) > MOST_CHANGED:
            return None
        deltas: Counter[str] = Counter()
        for i in changed:
            old, new = self.read[i].runs, read[i].runs
            if [r for r in old if self.first[r] == i] != [r for r in new if self.first.get(r) == i]:
                return None  # the runs this note writes first are not the same, in the same order
            if any(self.first.get(r, i) >= i for r in new if r not in old):
                return None  # a run new to the sum, or first written by a later note: its place would move
            for run in {*old, *new}:
                deltas[run] += new.get(run, 0) - old.get(run, 0)
        if any(self.runs[run] + d <= 0 for run, d in deltas.items()):
            return None  # a run no note writes any more: it would leave the sum
        self.spent = True
        folded: dict[str, str] = {}
        touched = self.touched if self.clusters is not None else set()
        for run, d in deltas.items():
            if d:
                self.runs[run] += d
                found = _run_words(run, folded)
                _add_run(found, d, self.seen.count, self.seen.beside)
                touched.update(found)
        for i in changed:
            old_lower, new_lower = self.read[i].lower, read[i].lower
            self.lower.update(new_lower - old_lower)
            self.lower.subtract(old_lower - new_lower)
            for word in old_lower - new_lower:
                if self.lower[word] <= 0:
                    del self.lower[word]
        moved = object.__new__(Tally)
        moved.paths, moved.read, moved.runs, moved.first, moved.seen = paths, read, self.runs, self.first, self.seen
        moved.lower, moved.spent, moved.updates = self.lower, False, self.updates + 1
        moved.clusters, moved.touched = self.clusters, touched
        self.clusters, self.touched = None, set()
        return moved

    def saved(self) -> tuple[Any, ...]:
        """The sums as built-in values, every key in its place (the convert cache keeps them: ``restored``)."""
        seen = self.seen
        beside = {w: dict(c) for w, c in seen.beside.items()}
        saved = dict(self.runs), self.first, dict(seen.count), beside, dict(self.lower)
        return saved if self.clusters is None or self.touched else (*saved, self.clusters.saved(self.paths))

    @classmethod
    def restored(cls, paths: list[str], read: list[BodyWords], saved: tuple[Any, ...]) -> Tally:
        """The tally ``saved`` for these notes' words (the ones it was summed from), as ``Tally(paths, read)``
        would make it, keys in the same places, without summing every note again (or reading their words)."""
        runs, first, count, beside, lower, *clusters = saved
        tally = object.__new__(cls)
        tally.paths, tally.read, tally.runs, tally.first = paths, read, Counter(runs), dict(first)
        tally.lower = Counter(lower)
        tally.seen = _Seen(Counter(count), defaultdict(Counter, {w: Counter(c) for w, c in beside.items()}))
        tally.spent, tally.updates = False, 0
        tally.clusters, tally.touched = (Clusters.restored(clusters[0], paths) if clusters else None), set()
        return tally


@dataclass
class TallyBox:
    """The ``Tally`` a convert hands to the next one (``spelling_variants`` takes it out and puts its own in)."""

    tally: Tally | None = None


def _tallied(notes: Sequence[Any], read: list[BodyWords], box: TallyBox | None) -> Tally:
    """The sums of every note's words: the boxed tally moved to ``read`` where it can be, else summed again; the
    tally now in use goes into ``box``."""
    paths = [n.path for n in notes]
    last = box.tally if box is not None else None
    tally = (last.moved(paths, read) if last is not None else None) or Tally(paths, read)
    if box is not None:
        box.tally = tally
    return tally


def _beside_title(
    word: str,
    title_word: str,
    seen: _Seen,
    titles: Mapping[str, set[str]],
    title_words: Mapping[str, list[tuple[str, ...]]],
    index: _Near,
) -> bool:
    """Is ``word`` written next to another word of a title that holds ``title_word`` (itself or misspelt)?"""
    partners = {w for p in titles[title_word] for name in title_words[p] if title_word in name for w in name}
    partners.discard(title_word)
    partners = {w for w in partners if len(w) >= 4}
    for neighbour in seen.beside.get(word, ()):
        if neighbour in partners or any(w in partners for _, w in index.near(neighbour, 1)):
            return True
    return False


def _aliases(
    names: list[tuple[str, ...]], clusters: Mapping[str, Counter[str]], seen: _Seen, broken: Counter[str]
) -> list[str]:
    """The note's title with variant spellings put in, where the vault writes it that way (each pair of
    neighbouring words seen side by side; a one-word title, the word itself)."""
    found = []
    for name in names[:1]:
        options = [[w, *clusters[w]] if w in clusters else [w] for w in name]
        for combo in itertools.islice(itertools.product(*options), 1, 50):
            pairs = list(itertools.pairwise(w for w in combo if w not in STOPWORDS))
            if (
                pairs
                and all(b in seen.beside.get(a, ()) for a, b in pairs)
                or (len(combo) == 1 and (seen.count[combo[0]] or broken[combo[0]]))
            ):
                found.append(" ".join(w.capitalize() for w in combo))
    return found
