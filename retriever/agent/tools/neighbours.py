"""``neighbours``: the notes one link away, both ways, each with the sentences that link them."""

from __future__ import annotations

import re
from typing import Annotated, Any

from retriever.agent.tools.context import ToolContext
from retriever.agent.tools.declare import Arg
from retriever.agent.tools.results import Shown, clip

OUT_LINKS = (
    "SELECT l.target_id, t.title, t.type, l.context, l.kind, l.status, l.raw FROM links l "
    "LEFT JOIN concepts t ON t.id = l.target_id WHERE l.source_id = ? ORDER BY l.line, l.target_id"
)
BACKLINKS = (
    "SELECT l.source_id, s.title, s.type, l.context, l.kind, l.status, l.raw FROM links l "
    "JOIN concepts s ON s.id = l.source_id WHERE l.target_id = ? AND l.source_id <> ? "
    "ORDER BY l.source_id, l.line"
)
_WIKILINK = re.compile(r"!?\[\[([^\]|#\n]*)(?:#[^\]|\n]*)?(?:\\?\|([^\]\n]*))?\]\]")  # [[T#h|label]] -> label or T
_LINK = re.compile(r"!?\[([^[\]\n]*)\]\((?:[^()\n]|\([^()\n]*\))*\)")  # [label](target) -> label


def neighbours(ctx: ToolContext, id: Annotated[str, Arg("Note id.", max_length=300)]) -> Shown:  # noqa: A002
    """The notes one link away: out-links (notes this note links to) and backlinks (notes that link to it), each
    with the sentence holding the link; the previous and next session for a session note."""
    note_id = ctx.notes.resolve(id)
    out = ctx.select(OUT_LINKS, [note_id])
    back = ctx.select(BACKLINKS, [note_id, note_id])
    graph = ctx.graph()
    sessions = graph.adjacent_sessions(note_id)
    payload: dict[str, Any] = {
        "id": note_id,
        "out_links": _link_list(ctx, out),
        "backlinks": _link_list(ctx, back),
        "adjacent_sessions": [{"id": s, "title": graph.concepts[s].title} for s in sessions],
    }
    payload["counts"] = {"out_links": len(payload["out_links"]), "backlinks": len(payload["backlinks"])}
    payload = ctx.fit(payload, "query links with sql for the rest", "backlinks", "out_links")
    linked = [*payload["out_links"], *payload["backlinks"], *payload["adjacent_sessions"]]
    return Shown(payload, tuple(dict.fromkeys([note_id, *(n["id"] for n in linked if n.get("id"))])))


def _link_list(ctx: ToolContext, rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    grouped: dict[str, dict[str, Any]] = {}
    for other, title, kind_of, context, kind, status, raw in rows:
        if other is None:  # a broken link or an attachment: what was written, and its status
            entry = grouped.setdefault(f"?{raw}", {"written": raw, "status": status, "contexts": []})
        else:
            entry = grouped.setdefault(other, {"id": other, "title": title, "type": kind_of, "contexts": []})
        if kind == "embed":
            entry["embed"] = True
        sentence = clip(labels(context), ctx.limits.context_chars)
        if sentence and sentence not in entry["contexts"] and len(entry["contexts"]) < 3:
            entry["contexts"].append(sentence)
    return list(grouped.values())[: ctx.limits.max_neighbours]


def labels(text: str | None) -> str:
    """Markdown links reduced to their labels: the model reads ids from the fields, not from link targets."""
    text = _WIKILINK.sub(lambda m: m.group(2) or m.group(1), text or "")
    return _LINK.sub(r"\1", text)
