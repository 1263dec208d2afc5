"""``search``: the notes about a question, through the bundle's retriever (the one tool that needs embeddings)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from retriever.agent.tools.context import ToolContext
from retriever.agent.tools.declare import Arg
from retriever.agent.tools.notes import SPACE
from retriever.agent.tools.results import Shown, ToolError, clip
from retriever.chunk import split_header
from retriever.retrieve import Hit, Mode

MAX_K = 20


@dataclass(frozen=True)
class SearchHit:
    """One hit as the model reads it: the note, the heading path of its best section and a snippet of it."""

    id: str
    title: str
    heading_path: tuple[str, ...]
    snippet: str
    score: float
    via: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "heading": " > ".join(self.heading_path), "snippet": self.snippet,
                "score": round(self.score, 4), "via": self.via}  # fmt: skip


def search(
    ctx: ToolContext,
    query: Annotated[str, Arg("What to look for, in words.", max_length=300)],
    mode: Literal["vector", "graph", "union"] = "union",
    k: Annotated[int, Arg(minimum=1, maximum=MAX_K)] = 10,
) -> Shown:
    """Find notes about a question or phrase: vector search over the notes plus a capped walk over their links.
    Returns note ids, titles, the heading and a snippet of the matching section. Then read_note(id) for the whole
    note."""
    if not str(query).strip():
        raise ToolError("query is empty: say in words what to look for")
    spec = replace(ctx.spec, mode=Mode(mode), k=int(k))
    hits = [_hit(h, ctx.limits.snippet_chars) for h in ctx.retriever().search(str(query), spec).hits]
    payload: dict[str, Any] = {"query": query, "mode": mode, "k": k, "hits": [h.to_json() for h in hits]}
    payload = ctx.fit(payload, "ask with a smaller k", "hits")
    shown = hits[: len(payload["hits"])]
    headings = {h.id: h.heading_path[-1:] for h in shown if h.heading_path}
    return Shown(payload, tuple(dict.fromkeys(h.id for h in shown)), headings)


def _hit(hit: Hit, snippet_chars: int) -> SearchHit:
    path, text = split_header(hit.text, hit.title)
    snippet = clip(SPACE.sub(" ", text).strip(), snippet_chars)
    return SearchHit(hit.note_id, hit.title, path, snippet, hit.score, str(hit.via))
