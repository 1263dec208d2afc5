"""The link-health report: what is broken, ambiguous or alias-only, where, and what to do about it."""

from __future__ import annotations

import difflib
import json
import posixpath
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from vault2okf.parse import Link, Problem
from vault2okf.resolve import Resolution, Status, normalise

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

    def to_json(self) -> dict[str, Any]:
        return self._json

    @cached_property
    def _json(self) -> dict[str, Any]:
        return {
            "vault": self.vault,
            "totals": self.totals(),
            "broken": self._grouped(Status.BROKEN, suggest=True),
            "ambiguous": self._ambiguous(),
            "alias_only": self._alias_only(),
            "missing_attachments": self._grouped(Status.MISSING_ATTACHMENT),
            "problems": [
                {"path": p, "line": pr.line, "kind": pr.kind, "message": pr.message} for p, pr in self.problems
            ],
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "orphans": self.orphans(),
            "hubs": self.hubs(),
        }

    def totals(self) -> dict[str, Any]:
        status = Counter(r.resolution.status.value for r in self.records)
        unique = {s: len({_target(r) for r in self.records if r.resolution.status is s}) for s in Status}
        return {
            "notes": len(self.notes),
            "links": sum(1 for r in self.records if not r.link.embed),
            "embeds": sum(1 for r in self.records if r.link.embed),
            "in_frontmatter": sum(1 for r in self.records if r.link.syntax == "frontmatter"),
            "by_status": {s.value: status.get(s.value, 0) for s in Status},
            "unique_targets": {
                "broken": unique[Status.BROKEN],
                "ambiguous": unique[Status.AMBIGUOUS],
                "alias": unique[Status.ALIAS],
                "missing_attachment": unique[Status.MISSING_ATTACHMENT],
            },
            "resolved_share": _share(self.records),
            "malformed_frontmatter": sum(1 for _, p in self.problems if p.kind == "frontmatter"),
            "orphans": len(self.orphans()),
        }

    def _grouped(self, status: Status, suggest: bool = False) -> list[dict[str, Any]]:
        groups = _by_target(r for r in self.records if r.resolution.status is status)
        names = self._names() if suggest else _Names({})
        out = []
        for target, recs in _by_count(groups):
            entry: dict[str, Any] = {"target": target, "count": len(recs), "at": _where(recs)}
            if suggest:
                entry["suggestions"] = names.suggest(target)
            out.append(entry)
        return out

    def _ambiguous(self) -> list[dict[str, Any]]:
        groups = _by_target(r for r in self.records if r.resolution.status is Status.AMBIGUOUS)
        return [
            {
                "target": target,
                "count": len(recs),
                "candidates": sorted({c for r in recs for c in r.resolution.candidates}),
                "chosen": sorted({r.resolution.path or "" for r in recs}),
                "at": _where(recs),
            }
            for target, recs in _by_count(groups)
        ]

    def _alias_only(self) -> list[dict[str, Any]]:
        groups = _by_target(r for r in self.records if r.resolution.status is Status.ALIAS)
        return [
            {"target": t, "count": len(recs), "note": recs[0].resolution.path, "at": _where(recs)}
            for t, recs in _by_count(groups)
        ]

    @cached_property
    def _degree(self) -> dict[str, set[str]]:
        neighbours: dict[str, set[str]] = defaultdict(set)
        for r in self.records:
            target = r.resolution.path
            if r.resolution.status in _NOTE_STATUSES and target and target != r.source:
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

    def _names(self) -> _Names:
        names = {posixpath.basename(n)[:-3].casefold(): n for n in self.notes}
        for note, aliases in self.aliases.items():
            names.update({a.casefold(): f"{note} (alias {a})" for a in aliases})
        return _Names(names)

    def to_markdown(self) -> str:
        data = self.to_json()
        return "\n".join(_markdown(data)) + "\n"

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"


_NOTE_STATUSES = (Status.RESOLVED, Status.AMBIGUOUS, Status.ALIAS)


def _target(r: LinkRecord) -> str:
    """One key per target however it is spelled (``Note``, ``note``, ``Note.md``, ``Caf\u0065\u0301``)."""
    return normalise(r.link.target).casefold() or r.link.raw


def _share(records: Sequence[LinkRecord]) -> float:
    notes = [r for r in records if r.resolution.status not in (Status.ATTACHMENT, Status.MISSING_ATTACHMENT)]
    ok = sum(1 for r in notes if r.resolution.status in (*_NOTE_STATUSES, Status.SELF))
    return round(ok / len(notes), 4) if notes else 1.0


def _by_target(records: Iterable[LinkRecord]) -> dict[str, list[LinkRecord]]:
    """Records grouped by target, each group named by its most common spelling."""
    groups: dict[str, list[LinkRecord]] = defaultdict(list)
    for r in records:
        groups[_target(r)].append(r)
    named = {}
    for recs in groups.values():
        spellings = Counter(normalise(r.link.target) or r.link.raw for r in recs)
        named[min(spellings, key=lambda sp: (-spellings[sp], sp))] = recs
    return named


def _by_count(groups: dict[str, list[LinkRecord]]) -> list[tuple[str, list[LinkRecord]]]:
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def _where(records: list[LinkRecord]) -> list[str]:
    return sorted({f"{r.source}:{r.link.line}" for r in records})


class _Names:
    """Note names and aliases for suggestions, indexed by first letter so difflib compares few of them."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        self.by_initial: dict[str, list[str]] = defaultdict(list)
        for name in sorted(names):
            self.by_initial[name[:1]].append(name)

    def suggest(self, target: str) -> list[str]:
        key = posixpath.basename(target).casefold()
        pool = self.by_initial.get(key[:1], [])
        return [self.names[c] for c in difflib.get_close_matches(key, pool, n=3, cutoff=0.75)]


def _markdown(d: dict[str, Any]) -> Iterable[str]:
    t = d["totals"]
    s = t["by_status"]
    yield f"# Link health: {d['vault']}"
    yield ""
    yield (
        f"{t['notes']} notes, {t['links']} links and {t['embeds']} embeds ({t['in_frontmatter']} in frontmatter); "
        f"{t['resolved_share']:.1%} of note links resolve."
    )
    yield ""
    yield "| status | links | unique targets |"
    yield "|---|---:|---:|"
    for status, count in s.items():
        yield f"| {status} | {count} | {t['unique_targets'].get(status, '')} |"
    yield from _section(
        "Broken links",
        d["broken"],
        "Nothing resolves these names. Create the note, fix the spelling, "
        "or pin a target in `vault2okf.toml` under `[links.overrides]`.",
        _broken_line,
    )
    yield from _section(
        "Ambiguous links",
        d["ambiguous"],
        "Several notes share this name; the first candidate "
        "was chosen per linking note (same folder, then shortest path, then alphabetical). Pin one under "
        "`[links.overrides]` or write the path in the link.",
        _ambiguous_line,
    )
    yield from _section(
        "Resolved only through an alias",
        d["alias_only"],
        "Obsidian itself leaves a bare `[[Alias]]` unresolved; write `[[Note|Alias]]` instead.",
        _alias_line,
    )
    yield from _section(
        "Missing attachments",
        d["missing_attachments"],
        "Embedded files that are not in the vault; left as written.",
        _broken_line,
    )
    yield from _problems(d)
    yield "## Orphans"
    yield ""
    yield f"{len(d['orphans'])} notes have no links in either direction."
    yield ""
    yield from (f"- {o}" for o in d["orphans"])
    yield ""
    yield "## Hubs"
    yield ""
    yield "| note | linked notes | share of vault |"
    yield "|---|---:|---:|"
    yield from (f"| {h['note']} | {h['degree']} | {h['share_of_vault']:.1%} |" for h in d["hubs"])


def _section(title: str, entries: list[dict[str, Any]], advice: str, fmt: Any) -> Iterable[str]:
    yield ""
    yield f"## {title} ({len(entries)} targets, {sum(e['count'] for e in entries)} links)"
    yield ""
    if entries:
        yield advice
        yield ""
    for e in entries:
        yield from fmt(e)
    yield ""


def _broken_line(e: dict[str, Any]) -> Iterable[str]:
    hint = f" — did you mean: {', '.join(e['suggestions'])}?" if e.get("suggestions") else ""
    yield f"- **{e['target']}** ×{e['count']}{hint}"
    yield _at(e["at"])


def _ambiguous_line(e: dict[str, Any]) -> Iterable[str]:
    chosen = ", ".join(f"`{c}`" for c in e["chosen"])
    yield f"- **{e['target']}** ×{e['count']} → chose {chosen} of {', '.join(f'`{c}`' for c in e['candidates'])}"
    yield _at(e["at"])


def _alias_line(e: dict[str, Any]) -> Iterable[str]:
    yield f"- **{e['target']}** ×{e['count']} → `{e['note']}`"
    yield _at(e["at"])


def _at(where: list[str]) -> str:
    """Up to ``AT_SHOWN`` locations; link-health.json lists every one."""
    more = (
        f" … and {len(where) - AT_SHOWN} more (every location is in link-health.json)" if len(where) > AT_SHOWN else ""
    )
    return f"  - at: {', '.join(f'`{w}`' for w in where[:AT_SHOWN])}{more}"


def _located(problem: dict[str, Any]) -> str:
    return problem["path"] if problem["line"] is None else f"{problem['path']}:{problem['line']}"


def _problems(d: dict[str, Any]) -> Iterable[str]:
    yield f"## Notes with problems ({len(d['problems'])})"
    yield ""
    yield (
        "Converted as well as they could be (malformed frontmatter is kept as text in the doc); each line says "
        "what was done and how to fix it."
    )
    yield ""
    yield from (f"- `{_located(p)}` {p['kind']}: {p['message']}" for p in d["problems"])
    if d["skipped"]:
        yield ""
        yield f"Skipped while walking ({len(d['skipped'])}):"
        yield ""
        yield from (f"- `{s['path']}`: {s['reason']}" for s in d["skipped"])
    yield ""
