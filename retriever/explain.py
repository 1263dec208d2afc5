"""Why a note was, or was not, retrieved (``search QUESTION --explain NOTE``, ``explain`` in ``search --json``, the
``search`` tool and ``/search``).

The search is run again stage by stage with the same code (``Retriever.vector_stage``, ``hop_offers``,
``hop_order``, ``fill``), over full rankings this time: where the note ranked among the nearest chunks, the BM25
chunks, their fusion, the vector stage's notes and the hop's candidates, which seeds offered it to the hop and
why, and what cut it: the filter, the vector stage not reaching it (nor any seed linking it), the k slots taken by
other notes' chunks (dedup), the notes cap or the tokens budget. The nearest setting that keeps it is found by
searching again with each candidate change, smallest first, and is only said when that search kept the note.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

import numpy as np

from retriever.errors import RetrieverError
from retriever.filters import NoteFilter
from retriever.graph import NoteGraph
from retriever.passage import Passages
from retriever.rankers import order
from retriever.retrieve import Offers, Retriever, Room, cuts, fit, room
from retriever.spec import Budget, Hit, Mode, Retrieval, SearchSpec, Seeds
from retriever.store import ChunkHit

MAX_K = 50  # the largest k tried for "--k N"
MAX_NOTES = 60  # the largest note cap tried for "--max-notes N"
MAX_MATCH = 60  # the largest vector@K tried for "--match-vector K"
PASSAGES = (200, 150, 100, 60)  # the passage sizes tried for "--passage N", longest first
SETTINGS_SAID = 3  # settings that keep the note, at most, nearest first


class Cut(StrEnum):
    """What kept a note out of the context."""

    FILTER = "filter"  # the search's filters stop it
    NOT_INDEXED = "not indexed"  # no chunk of it in the index
    NOT_REACHED = "not reached"  # the vector stage did not rank it among its k, and the hop did not offer it
    DEDUP = "dedup"  # other notes' chunks took the vector stage's k slots (k chunks, not k notes)
    CAP = "cap"  # the notes cap was full before its turn
    BUDGET = "budget"  # too many tokens for what the budget had left (the hop's: at most vector@match's)


@dataclass(frozen=True)
class Rank:
    """Where the note ranked in one stage: ``rank`` of ``of`` (1-based; None: it was not ranked there), the
    stage keeping its first ``keeps``."""

    stage: str
    rank: int | None
    of: int
    keeps: int

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "rank": self.rank, "of": self.of, "keeps": self.keeps}

    def line(self) -> str:
        where = f"ranked {self.rank} of {self.of}" if self.rank is not None else f"not ranked (of {self.of})"
        return f"{self.stage}: {where}; the stage keeps {self.keeps}"


@dataclass(frozen=True)
class Reach:
    """Why the hop offered the note: ``how`` (link, session, mentions, named, thread) and, for a link or an
    adjacent session, the seed (and its rank among the seeds)."""

    how: str
    seed: str | None = None
    seed_rank: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"how": self.how, "seed": self.seed, "seed_rank": self.seed_rank}

    def line(self) -> str:
        return f"{self.how} from seed {self.seed_rank} ({self.seed})" if self.seed else self.how


@dataclass(frozen=True)
class Setting:
    """A change to the search that keeps the note: the option as the CLI spells it and the spec's changes."""

    option: str
    changes: Mapping[str, Any] = field(default_factory=dict)

    def apply(self, spec: SearchSpec) -> SearchSpec:
        budget = {k: v for k, v in self.changes.items() if k in ("notes", "tokens", "match")}
        rest = {k: v for k, v in self.changes.items() if k not in budget}
        return replace(spec, **rest, budget=replace(spec.budget, **budget))

    def to_json(self) -> dict[str, Any]:
        changes = {k: v.to_json() if isinstance(v, NoteFilter) else v for k, v in self.changes.items()}
        return {"option": self.option, "changes": changes}


@dataclass(frozen=True)
class Explanation:
    note_id: str
    title: str
    vault_path: str
    kept: str | None  # "vector" or "hop" when the note is in the context
    position: int | None  # its place among the hits (1-based)
    ranks: tuple[Rank, ...]
    reached: tuple[Reach, ...]  # why the hop offered it (empty: it did not)
    cut: Cut | None
    why: str
    settings: tuple[Setting, ...] = ()  # each keeps it, nearest first
    linked_seeds: tuple[tuple[str, int], ...] = ()  # notes linking it and their rank in the vector stage

    def to_json(self) -> dict[str, Any]:
        return {
            "note_id": self.note_id, "title": self.title, "vault_path": self.vault_path, "kept": self.kept,
            "position": self.position, "stages": [r.to_json() for r in self.ranks],
            "reached": [r.to_json() for r in self.reached], "cut": None if self.cut is None else str(self.cut),
            "why": self.why, "settings": [s.to_json() for s in self.settings],
            "linked": [{"note_id": n, "vector_rank": r} for n, r in self.linked_seeds],
        }  # fmt: skip

    def lines(self) -> list[str]:
        head = f"explain: {self.title} ({self.vault_path})"
        out = [head, *(f"  {r.line()}" for r in self.ranks)]
        if self.reached:
            out.append("  hop offered it: " + ", ".join(r.line() for r in self.reached))
        if self.kept:
            out.append(f"  kept: hit {self.position}, via {self.kept}")
        else:
            out.append(f"  cut: {self.cut} — {self.why}")
            if self.settings:
                out.append("  kept with: " + "; or ".join(s.option for s in self.settings))
            else:
                out.append("  kept with: no single setting tried keeps it")
        return out


def explanation_lines(payload: Mapping[str, Any]) -> list[str]:
    """The lines of an explanation's JSON (``to_json``), as ``Explanation.lines`` prints it: `search --explain`
    through a server prints what it would print in process."""
    ranks = tuple(Rank(r["stage"], r["rank"], r["of"], r["keeps"]) for r in payload["stages"])
    reached = tuple(Reach(r["how"], r["seed"], r["seed_rank"]) for r in payload["reached"])
    cut = None if payload["cut"] is None else Cut(payload["cut"])
    settings = tuple(Setting(s["option"]) for s in payload["settings"])
    return Explanation(payload["note_id"], payload["title"], payload["vault_path"], payload["kept"],
                       payload["position"], ranks, reached, cut, payload["why"], settings).lines()  # fmt: skip


def resolve_note(graph: NoteGraph, ref: str) -> str:
    """The note id ``ref`` names: an id, a vault path (with or without ``.md``), a title or an alias (any case)."""
    wanted = ref.strip()
    if not wanted:
        raise RetrieverError("--explain names no note: give a note id, title or vault path")
    if wanted in graph.concepts:
        return wanted
    fold = wanted.casefold().removesuffix(".md")
    for kind in ("path", "title", "alias"):
        found = sorted({c.id for c in graph.concepts.values() if fold in _names(c, kind)})
        if len(found) == 1:
            return found[0]
        if found:
            paths = ", ".join(graph.concepts[n].vault_path for n in found[:5])
            raise RetrieverError(f"{ref!r} names {len(found)} notes ({paths}): give the vault path of one")
    names = [c.title for c in graph.concepts.values()]
    close = difflib.get_close_matches(wanted, names, n=3)
    hint = f" (did you mean {', '.join(repr(n) for n in close)}?)" if close else ""
    raise RetrieverError(f"no note {ref!r} in the bundle{hint}: give a note id, title or vault path")


def _names(concept: Any, kind: str) -> set[str]:
    if kind == "path":
        return {concept.vault_path.casefold().removesuffix(".md")}
    if kind == "title":
        return {concept.title.casefold()}
    return {a.casefold() for a in concept.aliases}


@dataclass(frozen=True)
class _Trace:
    """One search, stage by stage, over full rankings (``_trace``)."""

    nearest: list[ChunkHit]  # every chunk the filter lets through, nearest first
    found: list[Hit]  # the vector stage's notes, best first
    first: list[Hit]  # those the budget kept: the seeds
    offers: Offers | None  # None: no hop (vector mode)
    ranked: list[str]  # the hop's candidates, best first
    outcome: dict[str, tuple[Room, int]]  # the hop's fill: each candidate's fate and the tokens spent before it
    sizes: dict[str, int]  # the tokens of each hop candidate's best chunk, or its passage (what the hop would add)
    hop_budget: Budget | None
    ranks: tuple[Rank, ...]
    seed_budget: Budget  # what the seeds kept to: the search's budget, less a run's room (`runs`)
    passages: Passages | None = None  # how the hop cut its notes (`Retriever.passages`)


def explain(
    retriever: Retriever, question: str, spec: SearchSpec, ref: str, *, qvec: np.ndarray | None = None
) -> Explanation:
    """Where the note ``ref`` names ranked in each stage of ``spec``'s search, what cut it and what keeps it."""
    note = resolve_note(retriever.graph, ref)
    qvec = retriever.embed(question) if qvec is None else qvec
    got = retriever.search(question, spec, qvec=qvec)
    concept = retriever.graph.concepts[note]
    trace = _trace(retriever, question, spec, qvec, note)
    made = Explanation(note, concept.title, concept.vault_path, None, None, trace.ranks,
                       _reached(retriever, trace, note), None, "")  # fmt: skip
    for i, hit in enumerate(got.hits, 1):
        if hit.note_id == note:
            return replace(made, kept=str(hit.via), position=i)
    cut, why = _cut(retriever, question, spec, trace, note)
    settings = _keeping(retriever, question, spec, qvec, note, cut, trace)
    return replace(made, cut=cut, why=why, settings=settings, linked_seeds=_linked(retriever, trace, note))


def _trace(retriever: Retriever, question: str, spec: SearchSpec, qvec: np.ndarray, note: str) -> _Trace:
    passing = retriever.passing(spec.filters)
    rows = None if passing is None else passing.rows
    table = retriever.table
    every = table.nearest(qvec, len(table.ids) if rows is None else len(rows), rows)
    k, hybrid = spec.vector_k, spec.seeds is Seeds.HYBRID
    wide = k * 3 if spec.dedup else k
    read = k * 3 if hybrid else wide
    ranks = [Rank("vector chunks", _place(note, (c.note_id for c in every)), len(every), read)]
    if hybrid:
        lex = retriever.lexical_scores(question, spec.phrases, passing)
        scoring = [int(i) for i in np.argsort(-lex, kind="stable") if lex[i] > 0]
        ranks.append(Rank("lexical chunks", _place(note, (table.note_ids[i] for i in scoring)), len(scoring), wide * 3))
        fused = order(retriever.fused(every[:read], lex, wide))
        at = _place(note, (table.note_ids[retriever.row_of[c]] for c in fused))
        ranks.append(Rank("fused chunks", at, len(fused), wide))
    match = spec.budget.match if spec.mode is not Mode.VECTOR else None
    dense = every[: max(read, match or 0)]
    found = retriever.vector_stage(question, dense, spec, passing)
    seed_budget = retriever.seed_budget(question, found, dense, spec, passing)
    first = fit(found, seed_budget)
    ranks.append(Rank("vector notes", _place(note, (h.note_id for h in found)), len(found), len(first)))
    if spec.mode is Mode.VECTOR:
        return _Trace(every, found, first, None, [], {}, {}, None, tuple(ranks), seed_budget)
    offers = retriever.hop_offers(question, first, spec, passing, found)
    ranked, scores = retriever.hop_order(question, qvec, first, spec, passing, found)
    budget = retriever.hop_budget(dense, spec)
    outcome: dict[str, tuple[Room, int]] = {}
    passages = retriever.passages(question, first, spec.passage, spec.passage_sessions)
    retriever.fill(qvec, ranked, scores, budget, len(first), sum(h.tokens for h in first), outcome, passages)
    added = sum(1 for fate, _ in outcome.values() if fate is Room.FITS)
    ranks.append(Rank("hop candidates", _place(note, ranked), len(ranked), added))
    sizes = {n: part[2] for n in ranked if (part := retriever.hop_part(n, qvec, passages)) is not None}
    return _Trace(every, found, first, offers, ranked, outcome, sizes, budget, tuple(ranks), seed_budget, passages)


def _place(note: str, ids: Iterable[str]) -> int | None:
    """The 1-based rank of ``note``'s first appearance in ``ids``; None when it is not there."""
    return next((i for i, n in enumerate(ids, 1) if n == note), None)


def _reached(retriever: Retriever, trace: _Trace, note: str) -> tuple[Reach, ...]:
    """Why the hop offered ``note``: each seed linking it or next to it in session order, and the other reasons."""
    offers = trace.offers
    if offers is None or note not in offers.notes:
        return ()
    graph = retriever.graph
    seeds = list(enumerate(trace.first, 1))
    out = [Reach("link", s.note_id, i) for i, s in seeds if note in graph.neighbours.get(s.note_id, {})]
    if note in offers.sessions:
        out += [Reach("session", s.note_id, i) for i, s in seeds if note in graph.adjacent_sessions(s.note_id)]
    out += [Reach(how) for how, notes in (("mentions", offers.mentions), ("named", offers.named),
                                         ("thread", offers.thread), ("run", offers.runs),
                                         ("unlinked mention", offers.edges)) if note in notes]  # fmt: skip
    return tuple(out)


def _linked(retriever: Retriever, trace: _Trace, note: str) -> tuple[tuple[str, int], ...]:
    """The notes linking ``note`` (either way) that the vector stage ranked, nearest first (three at most): one of
    them as a seed would offer it to the hop."""
    ranked = {h.note_id: i for i, h in enumerate(trace.found, 1)}
    near = sorted((ranked[n], n) for n in retriever.graph.neighbours.get(note, {}) if n in ranked)
    return tuple((n, r) for r, n in near[:3])


def _cut(retriever: Retriever, question: str, spec: SearchSpec, trace: _Trace, note: str) -> tuple[Cut, str]:
    passing = retriever.passing(spec.filters)
    if passing is not None and note not in passing.notes:
        keys = ", ".join(_option(key, spec.filters) for key in _stopping(retriever, spec.filters, note))
        return Cut.FILTER, f"the filter ({keys}) leaves it out"
    if not retriever.table.rows_of.get(note):
        return Cut.NOT_INDEXED, "the index holds no chunk of it: run `vault2okf index` on the bundle"
    found = [h.note_id for h in trace.found]
    if note in found:
        made = _vector_cut(trace, trace.seed_budget, note)
        if trace.seed_budget == spec.budget:
            return made
        why = "left room for a run" if spec.runs else f"kept to vector@{spec.budget.match}'s tokens (--scale-seeds)"
        return made[0], f"{made[1]} (the seeds {why})"
    if note in trace.outcome:
        passages = trace.passages
        return _hop_cut(trace, spec, note, passages is not None and cuts(passages, retriever.graph.concepts[note]))
    stage = next((r for r in trace.ranks if r.rank is not None and r.stage in ("fused chunks", "vector chunks")), None)
    where = f"its best chunk ranked {stage.rank} ({stage.stage})" if stage else "no chunk of it ranked"
    if not spec.dedup:
        deduped = retriever.vector_stage(
            question, trace.nearest[: spec.vector_k * 3], replace(spec, dedup=True), passing
        )
        if note in {h.note_id for h in deduped}:
            return Cut.DEDUP, f"{where}, but other notes' chunks took the vector stage's {spec.vector_k} slots"
    linked = _linked(retriever, trace, note)
    hop = "no hop (vector mode)" if trace.offers is None else "no seed links it and the hop did not offer it"
    near = f" (the nearest note linking it ranked {linked[0][1]} in the vector stage)" if linked else ""
    kept = f"{spec.vector_k} notes" if spec.dedup else f"{spec.vector_k} chunks"
    return Cut.NOT_REACHED, f"{where}; the vector stage keeps {kept}; {hop}{near}"


def _vector_cut(trace: _Trace, budget: Budget, note: str) -> tuple[Cut, str]:
    """The vector stage ranked ``note`` but the budget kept it out: the notes cap, or the tokens left."""
    kept, tokens = 0, 0
    for rank, hit in enumerate(trace.found, 1):
        fate = room(budget, kept, tokens, hit.tokens)
        if hit.note_id == note:
            if fate is Room.CAP:
                return Cut.CAP, f"the vector stage ranked it {rank}, after the {budget.notes} notes of --max-notes"
            left = (budget.tokens or 0) - tokens
            return Cut.BUDGET, f"the vector stage ranked it {rank}; it needs {hit.tokens} tokens, {left} were left"
        if fate is Room.CAP:
            break
        if fate is Room.FITS:
            kept, tokens = kept + 1, tokens + hit.tokens
    return Cut.CAP, f"the vector stage ranked it after the {budget.notes} notes of --max-notes"


def _hop_cut(trace: _Trace, spec: SearchSpec, note: str, cut_to_passage: bool) -> tuple[Cut, str]:
    fate, spent = trace.outcome[note]
    at = _place(note, trace.ranked)
    head = f"the hop ranked it {at} of {len(trace.ranked)} candidates"
    if fate is Room.CAP:
        return Cut.CAP, f"{head}; the {spec.budget.notes} notes of --max-notes were taken before its turn"
    budget = trace.hop_budget or spec.budget
    cap = budget.tokens or 0
    of = f"vector@{spec.budget.match}'s {cap}" if spec.budget.match and cap != spec.budget.tokens else f"{cap}"
    if spent >= cap:
        return Cut.BUDGET, f"{head}; the seeds and the hop's earlier notes already spent {spent} tokens of {of}"
    part = f"its {spec.passage}-token passage" if cut_to_passage else "its best chunk"
    needs = f"{part} needs {trace.sizes[note]}" if note in trace.sizes else f"{part} needs more"
    return Cut.BUDGET, f"{head}; {cap - spent} tokens were left of {of}, and {needs}"


def _stopping(retriever: Retriever, filters: NoteFilter, note: str) -> list[str]:
    """The filter's keys that leave ``note`` out (without any one of them alone it may still be out)."""
    concept = retriever.graph.concepts[note]
    keys = [f.name for f in fields(filters) if getattr(filters, f.name)]
    return [key for key in keys if not NoteFilter(**{key: getattr(filters, key)}).allows(concept)] or keys


def _option(key: str, filters: NoteFilter) -> str:
    value = getattr(filters, key)
    values = value if isinstance(value, tuple) else (value,)
    flag = {"types": "--type", "tags": "--tag", "folders": "--folder"}.get(key, f"--{key}")
    return " ".join(f"{flag} {v}" for v in values)


def _tries(retriever: Retriever, spec: SearchSpec, trace: _Trace, note: str, cut: Cut) -> Iterator[Setting]:
    """Changes to try, nearest first, for what cut ``note``."""
    b = spec.budget
    if cut is Cut.FILTER:
        for key in _stopping(retriever, spec.filters, note):
            empty: Any = () if isinstance(getattr(spec.filters, key), tuple) else None
            yield Setting(f"without {_option(key, spec.filters)}", {"filters": replace(spec.filters, **{key: empty})})
        yield Setting("without the filters", {"filters": NoteFilter()})
    elif cut is Cut.CAP:
        yield from (Setting(f"--max-notes {n}", {"notes": n}) for n in range((b.notes or 0) + 1, MAX_NOTES + 1))
        yield from _room_for_all(spec, trace, note)
    elif cut is Cut.BUDGET:
        if b.match is not None and trace.hop_budget is not None and note in trace.outcome:
            yield from (Setting(f"--match-vector {m}", {"match": m}) for m in range(b.match + 1, MAX_MATCH + 1))
        base = b.tokens or 0
        for extra in (250, 500, 1000, 2000, 4000, 8000):
            yield Setting(f"--max-tokens {base + extra}", {"tokens": base + extra})
            if b.match is not None:
                yield Setting(f"--match-vector 0 --max-tokens {base + extra}", {"match": None, "tokens": base + extra})
        if note in trace.outcome:  # a hop note: shorter passages let more of the hop's notes fit
            yield from (Setting(f"--passage {n}", {"passage": n}) for n in PASSAGES if n < (spec.passage or n + 1))
        yield from _room_for_all(spec, trace, note)
    elif cut in (Cut.DEDUP, Cut.NOT_REACHED):
        if not spec.dedup:
            yield Setting("--dedup", {"dedup": True})
        if spec.mode is Mode.VECTOR:
            yield Setting("--mode union", {"mode": Mode.UNION})
        mode = {"mode": Mode.UNION} if spec.mode is Mode.GRAPH else {}
        prefix = "--mode union " if spec.mode is Mode.GRAPH else ""
        yield from (Setting(f"{prefix}--k {k}", {**mode, "k": k}) for k in range(spec.vector_k + 1, MAX_K + 1))
        for flag in ("named", "mentions", "threads", "sessions", "runs", "mention_edges", "entities"):
            if not getattr(spec, flag) and spec.mode is not Mode.VECTOR:
                yield Setting(f"--{flag.replace('_', '-')}", {flag: True})


def _room_for_all(spec: SearchSpec, trace: _Trace, note: str) -> Iterator[Setting]:
    """The budget with room for the note and for every note ranked before it in its stage (notes and tokens),
    the smallest vector@M covering those tokens where the hop is capped at vector@match: it keeps the note when
    neither limit alone does (lifting one, the other binds)."""
    b = spec.budget
    if note in trace.outcome:  # the hop: the seeds, then each candidate before it that has a chunk
        before = trace.ranked[: trace.ranked.index(note) + 1]
        sizes = [h.tokens for h in trace.first] + [trace.sizes[n] for n in before if n in trace.sizes]
    else:  # the vector stage
        at = [h.note_id for h in trace.found].index(note) if note in {h.note_id for h in trace.found} else None
        if at is None:
            return
        sizes = [h.tokens for h in trace.found[: at + 1]]
    notes, tokens = max(len(sizes), b.notes or 0), sum(sizes)
    if b.match is not None and note in trace.outcome:
        spent = 0
        for m, chunk in enumerate(trace.nearest, 1):
            spent += chunk.tokens
            if spent >= tokens and m > b.match:
                more = max(tokens, b.tokens or 0)
                flag = f" --max-tokens {more}" if b.tokens is not None and b.tokens < tokens else ""
                yield Setting(f"--max-notes {notes} --match-vector {m}{flag}", {"notes": notes, "match": m,
                              "tokens": more if flag else b.tokens})  # fmt: skip
                return
        yield Setting(f"--max-notes {notes} --match-vector 0 --max-tokens {tokens}",
                      {"notes": notes, "match": None, "tokens": max(tokens, b.tokens or 0)})  # fmt: skip
        return
    yield Setting(f"--max-notes {notes} --max-tokens {max(tokens, b.tokens or 0)}",
                  {"notes": notes, "tokens": max(tokens, b.tokens or 0)})  # fmt: skip


def _keeping(
    retriever: Retriever, question: str, spec: SearchSpec, qvec: np.ndarray, note: str, cut: Cut, trace: _Trace
) -> tuple[Setting, ...]:
    """The settings of ``_tries`` that keep ``note`` (each checked by searching again), one per option, nearest
    first; a filter's cut goes on to what keeps the note once that filter is gone."""
    kept: list[Setting] = []
    said: set[str] = set()
    for setting in _tries(retriever, spec, trace, note, cut):
        family = setting.option.split(" ")[0] if cut is not Cut.FILTER else setting.option
        combined = setting.option.count("--") > 1 and cut is not Cut.FILTER
        if family in said or len(kept) >= SETTINGS_SAID or (combined and kept):
            continue
        changed = setting.apply(spec)
        if _holds(retriever.search(question, changed, qvec=qvec), note):
            kept.append(setting)
            said.add(family)
        elif cut is Cut.FILTER and not kept:
            then = explain(retriever, question, changed, note, qvec=qvec)
            kept += [Setting(f"{setting.option} and {s.option}", {**setting.changes, **s.changes})
                     for s in then.settings[:1]]  # fmt: skip
            said.add(family)
    return tuple(kept)


def _holds(retrieval: Retrieval, note: str) -> bool:
    return any(h.note_id == note for h in retrieval.hits)
