"""``search``: the notes about a question, through the bundle's retriever (the one tool that needs embeddings)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from retriever.agent.tools.context import ToolContext
from retriever.agent.tools.declare import Arg
from retriever.agent.tools.notes import SPACE
from retriever.agent.tools.results import Shown, ToolError, clip
from retriever.chunk import split_header
from retriever.errors import RetrieverError
from retriever.filters import NoteFilter
from retriever.retrieve import Hit, Mode, SearchSpec

MAX_K = 20
MAX_FILTER = 200  # characters of a type, tag or folder


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
    type: Annotated[str | None, Arg("Only notes of this type (any case).", max_length=MAX_FILTER)] = None,
    tag: Annotated[str | None, Arg("Only notes with this tag or one nested under it.", max_length=MAX_FILTER)] = None,
    folder: Annotated[str | None, Arg("Only notes in this vault folder or below it.", max_length=MAX_FILTER)] = None,
    since: Annotated[str | None, Arg("Only notes dated on or after this day, YYYY-MM-DD.", max_length=10)] = None,
    until: Annotated[str | None, Arg("Only notes dated on or before this day, YYYY-MM-DD.", max_length=10)] = None,
    explain: Annotated[
        str | None,
        Arg(
            "A note id, title or vault path: say where it ranked in each stage, what "
            "kept it out and the nearest setting that keeps it.",
            max_length=600,
        ),
    ] = None,
) -> Shown:
    """Find notes about a question or phrase: vector search over the notes plus a capped walk over their links,
    optionally only notes of a type, tag, folder or date range. Returns note ids, titles, the heading and a snippet
    of the matching section. Then read_note(id) for the whole note. With explain: why that note was (not) found."""
    if not str(query).strip():
        raise ToolError("query is empty: say in words what to look for")
    given = {"type": type, "tag": tag, "folder": folder, "since": since, "until": until}
    spec = replace(ctx.spec, mode=Mode(mode), k=int(k), filters=_filters(ctx.spec.filters, given))
    hits = [_hit(h, ctx.limits.snippet_chars) for h in ctx.retriever().search(str(query), spec).hits]
    payload: dict[str, Any] = {"query": query, "mode": mode, "k": k, "hits": [h.to_json() for h in hits]}
    if not spec.filters.empty:
        payload["filters"] = spec.filters.to_json()
    if explain and explain.strip():
        payload["explain"] = _explain(ctx, str(query), spec, explain)
    payload = ctx.fit(payload, "ask with a smaller k", "hits")
    shown = hits[: len(payload["hits"])]
    headings = {h.id: h.heading_path[-1:] for h in shown if h.heading_path}
    return Shown(payload, tuple(dict.fromkeys(h.id for h in shown)), headings)


def _explain(ctx: ToolContext, query: str, spec: SearchSpec, note: str) -> dict[str, Any]:
    """``retriever.explain`` of ``note`` for this search, as JSON; a note the bundle does not hold is a ToolError."""
    from retriever.explain import explain

    try:
        return explain(ctx.retriever(), query, spec, note).to_json()
    except RetrieverError as e:
        raise ToolError(f"search: {e}") from None


def _filters(base: NoteFilter, given: dict[str, str | None]) -> NoteFilter:
    """The session's filter (the CLI's ``--type`` ...) with each key the call gives in place of the same key (a
    blank value, as models write for an argument they do not mean, gives none)."""
    try:
        return NoteFilter.from_json({**base.to_json(), **{key: v for key, v in given.items() if v and v.strip()}})
    except RetrieverError as e:
        raise ToolError(f"search: {e}") from None


def _hit(hit: Hit, snippet_chars: int) -> SearchHit:
    path, text = split_header(hit.text, hit.title)
    snippet = clip(SPACE.sub(" ", text).strip(), snippet_chars)
    return SearchHit(hit.note_id, hit.title, path, snippet, hit.score, str(hit.via))
