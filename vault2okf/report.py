"""The link-health report: what is broken, ambiguous or alias-only, where, and what to do about it."""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from vault2okf import frontyaml
from vault2okf.mdtext import code, text
from vault2okf.mentions import Mention, mentions_json
from vault2okf.parse import Link, Problem
from vault2okf.resolve import NOTE_STATUSES, Resolution, Status, block_problem, normalise
from vault2okf.suggest import Suggester, Suggestion, variant_map

HUBS = 15
AT_SHOWN = 12


@dataclass(frozen=True)
class LinkRecord:
    source: str  # vault path of the note holding the link
    link: Link
    resolution: Resolution


@dataclass(frozen=True)
class LinkReport:
    vault: str
    notes: tuple[str, ...]
    records: tuple[LinkRecord, ...]
    problems: tuple[tuple[str, Problem], ...]
    skipped: tuple[tuple[str, str], ...]
    aliases: dict[str, tuple[str, ...]]
    types: tuple[dict[str, Any], ...] = ()  # type_rows: folder -> type with counts
    variants: tuple[dict[str, Any], ...] = ()  # suggest.spelling_variants
    # target -> suggestions, filled as they are made: the convert cache keeps them for the next run, valid
    # while the notes, aliases and variants are the same (Suggester's inputs)
    suggested: dict[str, list[Suggestion]] = field(default_factory=dict, compare=False, repr=False)
    mentions: tuple[Mention, ...] = ()  # unlinked mentions (vault2okf.mentions), the report lists the top few
    memo: ReportMemo | None = field(default=None, compare=False, repr=False)  # a watcher's last report's pieces
    # a fresh process's: the last convert's link-health.json and the records that changed since (``LastReport``)
    last: LastReport | None = field(default=None, compare=False, repr=False)
    # each note's records (in the notes' order; ``records`` is them one after the other): with a memo, a section is
    # the memo's where each note whose records are not the very ones it was made from reads the same of them
    by_note: Mapping[str, tuple[LinkRecord, ...]] | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return self._json

    @cached_property
    def _json(self) -> dict[str, Any]:
        memo = self.memo
        self._changed  # noqa: B018 - found before the memo forgets what its sections were made from
        if memo is not None:
            memo.records = None  # until every section is made from this report's records
        kept = self._kept
        made = {
            "vault": self.vault,
            "totals": kept("totals", (self.problems, self.notes), self.totals, lambda: (self.records,)),
            "broken": kept("broken", (self.notes, self.aliases, self.variants), self._broken,
                           lambda: (self._by_status[Status.BROKEN],)),
            "ambiguous": kept("ambiguous", (), self._ambiguous,
                              lambda: (self._by_status[Status.AMBIGUOUS], self._by_status[Status.ATTACHMENT])),
            "alias_only": kept("alias_only", (), lambda: self._to_note(Status.ALIAS),
                               lambda: (self._by_status[Status.ALIAS],)),
            "overridden": kept("overridden", (), lambda: self._to_note(Status.OVERRIDDEN),
                               lambda: (self._by_status[Status.OVERRIDDEN],)),
            "excluded": kept("excluded", (), self._excluded, lambda: (self._by_status[Status.EXCLUDED],)),
            "missing_attachments": kept("missing_attachments", (), lambda: self._grouped(Status.MISSING_ATTACHMENT),
                                        lambda: (self._by_status[Status.MISSING_ATTACHMENT],)),
            "missing_blocks": kept("missing_blocks", (), self._missing_blocks,
                                   lambda: (self._by_status[Status.MISSING_BLOCK],)),
            "variants": list(self.variants),
            "types": list(self.types),
            "problems": [
                {"path": p, "line": pr.line, "kind": pr.kind, "message": pr.message} for p, pr in self.problems
            ],
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "orphans": kept("orphans", (self.notes,), self.orphans, lambda: (self.records,)),
            "hubs": kept("hubs", (self.notes,), self.hubs, lambda: (self.records,)),
            "mentions": kept("mentions", (self.mentions, self.notes), lambda: mentions_json(self.mentions, self.notes)),
        }  # fmt: skip
        if memo is not None and self.by_note is not None:
            memo.records, memo.notes = self.by_note, self.notes
        return made

    @cached_property
    def _by_status(self) -> dict[Status, list[LinkRecord]]:
        by: dict[Status, list[LinkRecord]] = {s: [] for s in Status}
        for r in self.records:
            by[r.resolution.status].append(r)
        return by

    @cached_property
    def _changed(self) -> tuple[Changed, ...] | None:
        """The records before and after of each note whose records are not the very ones the memo's sections were
        made from (None: not known)."""
        if self.memo is None or self.by_note is None:
            return None
        return _changed_since(self.memo, self.notes, self.by_note)

    def _kept(
        self,
        key: str,
        inputs: tuple[Any, ...],
        make: Callable[[], Any],
        records: Callable[[], tuple[Any, ...]] = tuple,
    ) -> Any:
        """A section of the JSON: the memo's, made from equal ``inputs`` (every value it is made from but the
        records) and records that read the same (each note's records the very ones the memo's were made from, or
        reading the same: ``_records_hold``; without ``by_note``, the ``records`` it reads, compared whole), else
        the last convert's where what it is made from has not changed (``LastReport.holds``), else made now (and
        remembered)."""
        if self.memo is None and self.last is None:
            return make()
        changed = self._changed
        if self.by_note is None:
            inputs = (*inputs, records())
        was = self.memo.data.get(key) if self.memo is not None else None
        holds = self.by_note is None or (changed is not None and _records_hold(key, changed, True))
        if was is not None and holds and was[0] == inputs:
            return was[1]
        value = self.last.values[key] if self.last is not None and self.last.holds(key, self) else make()
        if self.memo is not None:
            self.memo.data[key] = (inputs, value)
        return value

    def totals(self) -> dict[str, Any]:
        status = Counter(r.resolution.status.value for r in self.records)
        targets: dict[Status, set[str]] = {s: set() for s in Status}
        for r in self.records:
            targets[r.resolution.status].add(_target(r))
        unique = {s: len(found) for s, found in targets.items()}
        return {
            "notes": len(self.notes),
            "links": sum(1 for r in self.records if not r.link.embed),
            "embeds": sum(1 for r in self.records if r.link.embed),
            "in_frontmatter": sum(1 for r in self.records if r.link.syntax == "frontmatter"),
            "by_status": {s.value: status.get(s.value, 0) for s in Status},
            "unique_targets": {s.value: unique[s] for s in Status},
            "resolved_share": _share(self.records),
            "malformed_frontmatter": sum(1 for _, p in self.problems if p.kind == "frontmatter"),
            "orphans": len(self.orphans()),
        }

    def _grouped(self, status: Status) -> list[dict[str, Any]]:
        groups = _by_target(r for r in self.records if r.resolution.status is status)
        return [{"target": target, "count": len(recs), "at": _where(recs)} for target, recs in _by_count(groups)]

    def _broken(self) -> list[dict[str, Any]]:
        suggester: Suggester | None = None
        out = []
        for entry in self._grouped(Status.BROKEN):
            found = self.suggested.get(entry["target"])
            if found is None:
                suggester = suggester or self.suggester()
                found = self.suggested[entry["target"]] = suggester.suggest(entry["target"])
            entry["suggestions"] = [s.to_json() for s in found]
            if found and found[0].confident:
                entry["fix"] = {"path": found[0].path, "why": found[0].why}
            out.append(entry)
        return out

    def _ambiguous(self) -> list[dict[str, Any]]:
        """Links to one of several notes, and embeds of one of several attachments of the same name."""
        groups = _by_target(r for r in self.records if r.resolution.status is Status.AMBIGUOUS or
                            (r.resolution.status is Status.ATTACHMENT and r.resolution.candidates))  # fmt: skip
        out = []
        for target, recs in _by_count(groups):
            candidates = sorted({c for r in recs for c in r.resolution.candidates})
            entry: dict[str, Any] = {
                "target": target,
                "count": len(recs),
                "candidates": candidates,
                "chosen": sorted({r.resolution.path or "" for r in recs}),
                "at": _where(recs),
            }
            folders = {posixpath.dirname(r.source) for r in recs}  # one: every linking note in one folder
            near = [c for c in candidates if folders == {posixpath.dirname(c)}]
            if len(near) == 1:
                why = f"in the same folder as every note that links it ({_n(len({r.source for r in recs}), 'note')})"
                entry["fix"] = {"path": near[0], "why": why}
            out.append(entry)
        return out

    def _to_note(self, status: Status) -> list[dict[str, Any]]:
        groups = _by_target(r for r in self.records if r.resolution.status is status)
        return [
            {"target": t, "count": len(recs), "note": recs[0].resolution.path, "at": _where(recs)}
            for t, recs in _by_count(groups)
        ]

    def _excluded(self) -> list[dict[str, Any]]:
        groups = _by_target(r for r in self.records if r.resolution.status is Status.EXCLUDED)
        return [
            {"target": t, "count": len(recs), "note": recs[0].resolution.path,
             "why": EXCLUDED_WHY[recs[0].resolution.rule], "at": _where(recs)}
            for t, recs in _by_count(groups)
        ]  # fmt: skip

    def _missing_blocks(self) -> list[dict[str, Any]]:
        """Block references whose note has no such block id (or whose id is malformed), by note and id."""
        groups: dict[tuple[str, str], list[LinkRecord]] = defaultdict(list)
        for r in self.records:
            if r.resolution.status is Status.MISSING_BLOCK:
                block = (r.link.anchor or "").split("#")[-1].strip()
                groups[(r.resolution.path or "", block.casefold())].append(r)
        out = []
        for (note, _), recs in groups.items():
            spellings = Counter(f"{normalise(r.link.target)}#{(r.link.anchor or '').strip()}" for r in recs)
            target = min(spellings, key=lambda sp: (-spellings[sp], sp))
            why = block_problem(recs[0].link, recs[0].resolution)
            out.append({"target": target, "count": len(recs), "note": note, "why": why, "at": _where(recs)})
        return sorted(out, key=lambda e: (-e["count"], e["target"]))

    def suggester(self) -> Suggester:
        return Suggester(self.notes, self.aliases, variant_map(self.variants))

    @cached_property
    def _degree(self) -> dict[str, set[str]]:
        neighbours: dict[str, set[str]] = defaultdict(set)
        for r in self.records:
            target = r.resolution.path
            if r.resolution.status in NOTE_STATUSES and target and target != r.source:
                neighbours[r.source].add(target)
                neighbours[target].add(r.source)
        return neighbours

    def orphans(self) -> list[str]:
        return [n for n in self.notes if not self._degree.get(n)]

    def hubs(self) -> list[dict[str, Any]]:
        ranked = sorted(self._degree.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:HUBS]
        return [
            {"note": note, "degree": len(n), "share_of_vault": round(len(n) / max(len(self.notes), 1), 3)}
            for note, n in ranked
        ]

    def to_markdown(self, memo: ReportMemo | None = None) -> str:
        """The report for people; every name from the vault in it escaped (``mdtext``): shown, never HTML. With
        ``memo``, a piece whose values are the ones last rendered takes that text again (a watcher's next report)."""
        data = self.to_json()
        pieces = []
        for name, keys, make in _MARKDOWN_PIECES:
            values = tuple(data[k] for k in keys)
            was = memo.markdown.get(name) if memo is not None else None
            if was is not None and was[0] == values:
                text_ = was[1]
            else:
                lines = list(make(*values))
                text_ = "\n".join(lines) if lines else None
                if memo is not None:
                    memo.markdown[name] = (values, text_)
            if text_ is not None:
                pieces.append(text_)
        return _front(data) + "\n".join(pieces) + "\n"

    def to_json_text(self, memo: ReportMemo | None = None) -> str:
        """``json.dumps(to_json(), indent=2, ensure_ascii=False)``, a top-level key at a time: with ``memo``, a key
        whose value is the one last dumped takes that text again (a watcher's next report)."""
        return _joined(self._json_parts(memo))

    def to_json_file(self, memo: ReportMemo | None = None) -> tuple[bytes, str]:
        """``to_json_text`` encoded, and its sha256: with ``memo``, where every key's text is the very one of the
        last file (``ReportMemo.whole``), that file's bytes and digest, neither joined nor hashed again."""
        texts = self._json_parts(memo)
        was = memo.whole if memo is not None else None
        if (
            was is not None
            and len(was[0]) == len(texts)
            and all(a[0] == b[0] and a[1] is b[1] for a, b in zip(was[0], texts, strict=True))
        ):
            return was[1], was[2]
        data = _joined(texts).encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        if memo is not None:
            memo.whole = (texts, data, digest)
        return data, digest

    def _json_parts(self, memo: ReportMemo | None) -> tuple[tuple[str, str], ...]:
        """Each top-level key with its value's text (``_joined`` makes the file of them)."""
        parts = []
        for key, value in self.to_json().items():
            was = memo.json.get(key) if memo is not None else None
            if was is not None and was[0] == value:
                text = was[1]
            else:
                text = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
                if memo is not None:
                    memo.json[key] = (value, text)
            parts.append((key, text))
        return tuple(parts)


def _joined(parts: Iterable[tuple[str, str]]) -> str:
    """The JSON file of each top-level key and its text (``LinkReport.to_json_text``)."""
    return "{\n" + ",\n".join(f"  {json.dumps(key, ensure_ascii=False)}: {text}" for key, text in parts) + "\n}\n"


# the JSON's sections made from the records of these statuses alone (besides the notes, aliases and variants)
_SECTION_STATUSES: dict[str, frozenset[Status]] = {
    "broken": frozenset({Status.BROKEN}),
    "ambiguous": frozenset({Status.AMBIGUOUS, Status.ATTACHMENT}),
    "alias_only": frozenset({Status.ALIAS}),
    "overridden": frozenset({Status.OVERRIDDEN}),
    "excluded": frozenset({Status.EXCLUDED}),
    "missing_attachments": frozenset({Status.MISSING_ATTACHMENT}),
    "missing_blocks": frozenset({Status.MISSING_BLOCK}),
}
Changed = tuple[tuple[LinkRecord, ...], tuple[LinkRecord, ...]]  # one note's records before and after


@dataclass
class LastReport:
    """The last convert's ``link-health.json`` as written (its values, and its text under each top-level key), for
    a convert in a fresh process, which has no ``ReportMemo``: a section is taken from it where nothing it is made
    from changed since (``holds``), and a key's text wherever its value is the same (``seed``).

    ``same``: the notes are the last convert's, in the same order, with the same aliases; ``suggestions``: the
    broken links' suggestions are made from the same notes, aliases and variants; ``changed``: the records before
    and after of each note whose records are not the very ones of last time (every other note's are). A section
    is the last one where each changed note's records that it reads are equal before and after, field by field
    as it reads them."""

    values: dict[str, Any]
    texts: dict[str, str]
    same: bool
    suggestions: bool
    changed: tuple[Changed, ...]
    _held: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, same: bool, suggestions: bool, changed: tuple[Changed, ...]) -> LastReport | None:
        """From the text of the last ``link-health.json`` (None when it is not what ``to_json_text`` writes)."""
        try:
            values = json.loads(text)
        except ValueError:
            return None
        texts = _split_json(text)
        if not isinstance(values, dict) or texts is None or list(texts) != list(values):
            return None
        return cls(values, texts, same, suggestions, changed)

    def seed(self, memo: ReportMemo, data: bytes, digest: str) -> None:
        """Each key's text beside its value into ``memo.json`` (``to_json_text`` takes it where the value is equal),
        and the file's ``data`` (its sha256 ``digest``) as made of them (``to_json_file`` takes it where every key's
        text is taken)."""
        memo.json.update((key, (self.values[key], written)) for key, written in self.texts.items())
        memo.whole = (tuple(self.texts.items()), data, digest)

    def holds(self, key: str, report: LinkReport) -> bool:
        if key not in self._held:
            self._held[key] = key in self.values and self.same and self._holds(key, report)
        return self._held[key]

    def _holds(self, key: str, report: LinkReport) -> bool:
        if key == "broken" and not self.suggestions:  # the notes, aliases and variants suggestions are made from
            return False
        if key == "totals":
            problems = [
                {"path": p, "line": pr.line, "kind": pr.kind, "message": pr.message} for p, pr in report.problems
            ]
            if self.values.get("problems") != problems:
                return False
        return _records_hold(key, self.changed)


def _records_hold(key: str, changed: Iterable[Changed], others: bool = False) -> bool:
    """Does the section ``key`` read the same of each note's records before and after (``changed``: those of the
    notes whose records changed; every other note's are the very same)? ``others`` for a section that reads no
    records."""
    statuses = _SECTION_STATUSES.get(key)
    if statuses is not None:
        return all(_seen(old, statuses) == _seen(new, statuses) for old, new in changed)
    if key in ("orphans", "hubs"):
        return all(_neighbours(old) == _neighbours(new) for old, new in changed)
    if key == "totals":
        return all(_neighbours(old) == _neighbours(new) and _counted(old) == _counted(new) for old, new in changed)
    return others


def _changed_since(
    memo: ReportMemo, notes: tuple[str, ...], by_note: Mapping[str, tuple[LinkRecord, ...]]
) -> tuple[Changed, ...] | None:
    """The records before and after of each note whose records are not the very ones the memo's sections were made
    from; None where that is not known (no such records, or other notes)."""
    last = memo.records
    if last is None or memo.notes != notes:
        return None
    changed = []
    for path, records in by_note.items():
        was = last.get(path)
        if was is not records:
            if was is None:
                return None
            changed.append((was, records))
    return tuple(changed)


def _seen(records: tuple[LinkRecord, ...], statuses: frozenset[Status]) -> list[tuple[Any, ...]]:
    """What a section of these statuses reads of each record."""
    return [
        (r.link.line, r.link.target, r.link.raw, r.link.anchor, r.resolution)
        for r in records
        if r.resolution.status in statuses
    ]


def _neighbours(records: tuple[LinkRecord, ...]) -> set[str]:
    """The notes these records (one note's) link, as ``LinkReport._degree`` counts them."""
    return {
        r.resolution.path
        for r in records
        if r.resolution.status in NOTE_STATUSES and r.resolution.path and r.resolution.path != r.source
    }


def _counted(records: tuple[LinkRecord, ...]) -> list[tuple[Any, ...]]:
    """What ``LinkReport.totals`` reads of each record."""
    return [(r.resolution.status, r.link.embed, r.link.syntax, _target(r)) for r in records]


def _split_json(text: str) -> dict[str, str] | None:
    """The text under each top-level key of a file ``to_json_text`` wrote (None when it is not one): a top-level
    key is the only thing that starts a line with two spaces and a quote (nested lines have four or more, and a
    string holds no line break). Each value's text is sliced once from ``text`` (11 MB at 13k notes), never split,
    copied or joined again: each key must be written as ``json.dumps`` writes it, so the file is these texts
    joined."""
    if not (text.startswith('{\n  "') and text.endswith("\n}\n")):
        return None
    out: dict[str, str] = {}
    start, stop = 4, len(text) - 3  # the first key's quote; the end of the last value
    while True:
        colon = text.find('": ', start + 1, stop)  # a key holds no '": ' (its quotes are escaped)
        if colon < 0:
            return None
        written = text[start : colon + 1]
        try:
            key = json.loads(written)
        except ValueError:
            return None
        if not isinstance(key, str) or json.dumps(key, ensure_ascii=False) != written or key in out:
            return None
        after = text.find(',\n  "', colon, stop)
        out[key] = text[colon + 3 : stop if after < 0 else after]
        if after < 0:
            return out
        start = after + 4


@dataclass
class ReportMemo:
    """Pieces of the last reports as rendered, each beside the value it was rendered from, so that the next
    report renders again only the pieces whose value changed: the JSON by top-level key, the page by section.
    Held in memory by a watcher (``cache.Body``), never saved; each entry is always a value and its own text."""

    data: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # the JSON's sections, by what made them
    json: dict[str, tuple[Any, str]] = field(default_factory=dict)
    html: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    markdown: dict[str, tuple[Any, str | None]] = field(default_factory=dict)  # link-health.md's (_MARKDOWN_PIECES)
    # the last link-health.json: each key with its text (the very strings of ``json``), the file's bytes, their sha256
    whole: tuple[tuple[tuple[str, str], ...], bytes, str] | None = None
    # the notes and each note's records the sections in ``data`` were made from (None: not known)
    notes: tuple[str, ...] = ()
    records: Mapping[str, tuple[LinkRecord, ...]] | None = None
    types: tuple[list[Any], tuple[dict[str, Any], ...]] | None = None  # type_rows' last notes' metas and rows
    paths: tuple[list[str], list[Any]] | None = None  # the last notes' paths, as spelling_variants took them
    indexes: dict[str, Any] = field(default_factory=dict)  # the folders' index.md (bundle.folder_indexes)


EXCLUDED_WHY = {
    "excluded": "the note is in an excluded folder ([walk] exclude)",
    "excluded folder": "the link's path goes through an excluded folder ([walk] exclude)",
    "excluded name": "the name matches [links] excluded_names (templates live in excluded folders)",
}


def type_rows(metas: Iterable[Any]) -> list[dict[str, Any]]:
    """Folder -> type with note counts: where each type came from (``meta.TypeOrigin``), most notes first."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for meta in metas:
        origin = meta.origin
        if origin is not None:
            counts[(origin.folder, origin.type, origin.rule)] += 1
    rows = [{"folder": f, "type": t, "rule": r, "notes": n} for (f, t, r), n in counts.items()]
    return sorted(rows, key=lambda row: (-row["notes"], row["folder"], row["type"]))


def _target(r: LinkRecord) -> str:
    """One key per target however it is spelled (``Note``, ``note``, ``Note.md``, ``Caf\u0065\u0301``)."""
    return _target_key(r.link.target, r.link.raw)


@lru_cache(maxsize=1 << 18)
def _target_key(target: str, raw: str) -> str:
    """``_target``, remembered (a bounded memo: a vault writes the same targets again and again, and a watcher's
    next report meets the same ones)."""
    return normalise(target).casefold() or raw


@lru_cache(maxsize=1 << 18)
def _spelling(target: str, raw: str) -> str:
    return normalise(target) or raw


def _share(records: Sequence[LinkRecord]) -> float:
    skip = (Status.ATTACHMENT, Status.MISSING_ATTACHMENT, Status.EXCLUDED)
    notes = [r for r in records if r.resolution.status not in skip]
    ok = sum(1 for r in notes if r.resolution.status in NOTE_STATUSES or r.resolution.status is Status.SELF)
    return round(ok / len(notes), 4) if notes else 1.0


def _by_target(records: Iterable[LinkRecord]) -> dict[str, list[LinkRecord]]:
    """Records grouped by target, each group named by its most common spelling."""
    groups: dict[str, list[LinkRecord]] = defaultdict(list)
    for r in records:
        groups[_target(r)].append(r)
    named = {}
    for recs in groups.values():
        spellings = Counter(_spelling(r.link.target, r.link.raw) for r in recs)
        named[min(spellings, key=lambda sp: (-spellings[sp], sp))] = recs
    return named


def _by_count(groups: dict[str, list[LinkRecord]]) -> list[tuple[str, list[LinkRecord]]]:
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def _where(records: list[LinkRecord]) -> list[str]:
    return sorted({f"{r.source}:{r.link.line}" for r in records})


STATUS_NAMES = {
    "resolved": "resolved",
    "ambiguous": "ambiguous (several notes share the name)",
    "alias": "resolved only through an alias",
    "overridden": "pinned by [links.overrides]",
    "broken": "broken",
    "self": "to a heading of the same note",
    "attachment": "attachments",
    "missing_attachment": "missing attachments",
    "excluded": "into excluded folders",
    "missing_block": "to a block id the note lacks",
}
TYPE_RULES = {"config": "vault2okf.toml [types]", "folder": "folder name", "frontmatter": "frontmatter `type`",
              "default": "top of the vault"}  # fmt: skip


def _n(count: int, word: str, plural: str | None = None) -> str:
    """``1 note``, ``2 notes``, ``1 entry``, ``3 entries``."""
    return f"{count:,} {word if count == 1 else plural or word + 's'}"


def _front(d: dict[str, Any]) -> str:
    """The report's frontmatter: an OKF doc of type ``report`` (OKF v0.2 §4: every doc but an index has one)."""
    t = d["totals"]
    description = (
        f"Link health of the vault {d['vault']}: {t['by_status'].get('broken', 0):,} broken and "
        f"{t['by_status'].get('ambiguous', 0):,} ambiguous links of {t['links']:,}, with where they are and what "
        "to do; orphans, hubs and unlinked mentions."
    )
    head = {"type": "report", "title": f"Link health: {d['vault']}", "description": description}
    return f"---\n{frontyaml.dump(head)}---\n"


def _head(vault: str, t: dict[str, Any]) -> Iterable[str]:
    s = t["by_status"]
    yield f"# Link health: {text(vault)}"
    yield ""
    yield (
        f"{_n(t['notes'], 'note')}, {_n(t['links'], 'link')} and {_n(t['embeds'], 'embed')} "
        f"({t['in_frontmatter']:,} in frontmatter); {t['resolved_share']:.1%} of note links resolve."
    )
    yield ""
    yield "| links | count | distinct targets |"
    yield "|---|---:|---:|"
    for status, count in s.items():
        if count:
            yield f"| {STATUS_NAMES.get(status, status)} | {count:,} | {t['unique_targets'][status]:,} |"


_LINK_SECTIONS: tuple[tuple[str, str, str, Callable[[dict[str, Any]], Iterable[str]]], ...] = (
    ("Broken links", "broken", "", lambda e: _broken_line(e)),
    ("Ambiguous links", "ambiguous", "", lambda e: _ambiguous_line(e)),
    ("Resolved only through an alias", "alias_only", "", lambda e: _note_line(e)),
    ("Pinned by an override", "overridden", "Resolved by `[links.overrides]` in the config.", lambda e: _note_line(e)),
    ("Links into excluded folders", "excluded", "", lambda e: _note_line(e)),
    ("Missing attachments", "missing_attachments", "Embedded files that are not in the vault; left as written.",
     lambda e: _broken_line(e)),
    ("Links to missing blocks", "missing_blocks", "", lambda e: _block_line(e)),
)  # fmt: skip


def _advice(key: str, given: str) -> str:
    found = {"broken": BROKEN_ADVICE, "ambiguous": AMBIGUOUS_ADVICE, "alias_only": ALIAS_ADVICE,
             "excluded": EXCLUDED_ADVICE, "missing_blocks": MISSING_BLOCK_ADVICE}  # fmt: skip
    return found.get(key, given)


def _clean(*sections: Any) -> Iterable[str]:
    clean = [title.lower() for (title, _, _, _), entries in zip(_LINK_SECTIONS, sections, strict=True) if not entries]
    if clean:
        yield ""
        yield f"Nothing to report for: {', '.join(clean)}."


def _link_section(index: int) -> Callable[[Any], Iterable[str]]:
    title, key, advice, fmt = _LINK_SECTIONS[index]

    def make(entries: Any) -> Iterable[str]:
        if entries:
            yield from _section(title, entries, _advice(key, advice), fmt)

    return make


def _markdown(d: dict[str, Any]) -> Iterable[str]:
    """The report's lines after its frontmatter (``LinkReport.to_markdown`` joins the same pieces, memo or not)."""
    for _, keys, make in _MARKDOWN_PIECES:
        yield from make(*(d[k] for k in keys))


BROKEN_ADVICE = (
    "Nothing resolves these names. Create the note, fix the spelling, or pin a target under "
    "`[links.overrides]`: `vault2okf links BUNDLE --overrides > fixes.toml` writes the confident suggestions "
    "(the others commented out), and `vault2okf convert VAULT -o BUNDLE --config fixes.toml` applies them."
)
AMBIGUOUS_ADVICE = (
    "Several notes share this name; the first candidate was chosen per linking note (same folder, then shortest "
    "path, then alphabetical). Pin one under `[links.overrides]` or write the path in the link."
)
ALIAS_ADVICE = "Obsidian itself leaves a bare `[[Alias]]` unresolved; write `[[Note|Alias]]` instead."
MISSING_BLOCK_ADVICE = (
    "The note exists but holds no block with this id, so the link goes to the top of the note. End the block's "
    'line with ` ^id` (Obsidian\'s "Copy link to block" does), or correct the id in the link.'
)
EXCLUDED_ADVICE = (
    "These notes exist but are in a folder excluded by `[walk] exclude` (templates), so the links stay text."
)


def _section(title: str, entries: list[dict[str, Any]], advice: str, fmt: Any) -> Iterable[str]:
    yield ""
    yield f"## {title} ({_n(len(entries), 'target')}, {_n(sum(e['count'] for e in entries), 'link')})"
    yield ""
    yield advice
    yield ""
    for e in entries:
        yield from fmt(e)


def _broken_line(e: dict[str, Any]) -> Iterable[str]:
    found = e.get("suggestions") or []
    hint = ""
    if found:
        hint = " — did you mean: " + "; ".join(f"{code(x['path'])} ({text(x['why'])})" for x in found[:3]) + "?"
    yield f"- **{text(e['target'])}** ×{e['count']}{hint}"
    yield _at(e["at"])


def _ambiguous_line(e: dict[str, Any]) -> Iterable[str]:
    chosen = ", ".join(code(c) for c in e["chosen"])
    candidates = ", ".join(code(c) for c in e["candidates"])
    yield f"- **{text(e['target'])}** ×{e['count']} → chose {chosen} of {candidates}"
    yield _at(e["at"])


def _note_line(e: dict[str, Any]) -> Iterable[str]:
    yield f"- **{text(e['target'])}** ×{e['count']} → " + (code(e["note"]) if e["note"] else text(e.get("why", "")))
    yield _at(e["at"])


def _block_line(e: dict[str, Any]) -> Iterable[str]:
    yield f"- **{text(e['target'])}** ×{e['count']} → {code(e['note'])}: {text(e['why'])}"
    yield _at(e["at"])


def _at(where: list[str]) -> str:
    """Up to ``AT_SHOWN`` locations; link-health.json and link-health.html list every one."""
    more = f" … and {len(where) - AT_SHOWN:,} more (all in link-health.html)" if len(where) > AT_SHOWN else ""
    return f"  - at: {', '.join(code(w) for w in where[:AT_SHOWN])}{more}"


def _variants(clusters: list[dict[str, Any]]) -> Iterable[str]:
    if not clusters:
        return
    yield ""
    yield f"## Spelling variants ({_n(len(clusters), 'name')})"
    yield ""
    yield (
        "Words the notes write close to a word of a note title. Add the suggested aliases to the note's "
        "frontmatter (`aliases:`), or correct the spelling, so that links and search find the note."
    )
    yield ""
    for c in clusters:
        spellings = ", ".join(f"{text(w)} ×{n}" for w, n in c["variants"].items())
        aliases = "; ".join(f"{code(a['alias'])} for {code(a['note'])}" for a in c["aliases"])
        notes = ", ".join(code(p) for p in c["notes"][:3]) + (" …" if len(c["notes"]) > 3 else "")
        yield f"- **{text(c['word'])}** ({notes}) is also written {spellings}" + (
            f"; suggested aliases: {aliases}" if aliases else ""
        )


def _types(rows: list[dict[str, Any]]) -> Iterable[str]:
    if not rows:
        return
    yield ""
    yield f"## Types ({_n(len({r['type'] for r in rows}), 'type')})"
    yield ""
    yield (
        "Where each type came from. To change one, map the folder under `[types]` in `vault2okf.toml` "
        '(`"Folder name" = "Type"`), or set `type:` in a note.'
    )
    yield ""
    yield "| folder | type | from | notes |"
    yield "|---|---|---|---:|"
    for r in rows:
        rule = TYPE_RULES.get(r["rule"], r["rule"])
        yield f"| {text(r['folder']) or '(top of the vault)'} | {text(r['type'])} | {rule} | {r['notes']:,} |"


def _located(problem: dict[str, Any]) -> str:
    return problem["path"] if problem["line"] is None else f"{problem['path']}:{problem['line']}"


def _problems(d: dict[str, Any]) -> Iterable[str]:
    if d["problems"]:
        yield ""
        yield f"## Notes with problems ({_n(len(d['problems']), 'problem')})"
        yield ""
        yield (
            "Converted as well as they could be (malformed frontmatter is kept as text in the doc); each line "
            "says what was done and how to fix it."
        )
        yield ""
        yield from (f"- {code(_located(p))} {text(p['kind'])}: {text(p['message'])}" for p in d["problems"])
    if d["skipped"]:
        yield ""
        yield f"## Skipped while walking ({_n(len(d['skipped']), 'file')})"
        yield ""
        yield from (f"- {code(s['path'])}: {text(s['reason'])}" for s in d["skipped"])


def _problem_piece(problems: list[dict[str, Any]], skipped: list[dict[str, Any]]) -> Iterable[str]:
    return _problems({"problems": problems, "skipped": skipped})


def _orphans(orphans: list[str]) -> Iterable[str]:
    yield ""
    yield "## Orphans"
    yield ""
    if not orphans:
        yield "Every note links or is linked."
        return
    yield f"{_n(len(orphans), 'note')} {'has' if len(orphans) == 1 else 'have'} no links in either direction."
    yield ""
    yield from (f"- {text(o)}" for o in orphans)


def _hubs(hubs: list[dict[str, Any]]) -> Iterable[str]:
    if not hubs:
        return
    yield ""
    yield "## Hubs"
    yield ""
    yield "| note | linked notes | share of vault |"
    yield "|---|---:|---:|"
    yield from (f"| {text(h['note'])} | {h['degree']:,} | {h['share_of_vault']:.1%} |" for h in hubs)


MENTIONS_ADVICE = (
    "These notes name another note (its file name, title or an alias, as whole words) without linking it. "
    "Link the ones you mean: `vault2okf links BUNDLE --mentions` prints each with its line and the wikilink to write."
)


def _mentions(section: dict[str, Any]) -> Iterable[str]:
    if not section["total"]:
        return
    yield ""
    yield (
        f"## Could be linked ({_n(section['total'], 'unlinked mention')} in {_n(section['notes'], 'note')}, "
        f"{_n(section['targets'], 'note')} named)"
    )
    yield ""
    yield MENTIONS_ADVICE
    yield ""
    for entry in section["by_note"]:
        shown = entry["mentions"]
        more = f" (top {len(shown)} of {entry['count']})" if entry["count"] > len(shown) else ""
        yield f"- **{text(entry['note'])}**{more}: " + "; ".join(
            f"line {m['line']} “{text(m['text'])}” → {code(m['link'])}" + (f" ×{m['count']}" if m["count"] > 1 else "")
            for m in shown
        )


# link-health.md in pieces, each made from the JSON's values under its keys (``LinkReport.to_markdown`` keeps a
# watcher's last text of each piece beside those values)
_MARKDOWN_PIECES: tuple[tuple[str, tuple[str, ...], Callable[..., Iterable[str]]], ...] = (
    ("head", ("vault", "totals"), _head),
    ("clean", tuple(key for _, key, _, _ in _LINK_SECTIONS), _clean),
    *((key, (key,), _link_section(i)) for i, (_, key, _, _) in enumerate(_LINK_SECTIONS)),
    ("variants", ("variants",), _variants),
    ("types", ("types",), _types),
    (
        "problems",
        ("problems", "skipped"),
        lambda problems, skipped: _problems({"problems": problems, "skipped": skipped}),
    ),
    ("orphans", ("orphans",), _orphans),
    ("hubs", ("hubs",), _hubs),
    ("mentions", ("mentions",), _mentions),
)
