"""What a tool call returns: ``Shown`` (the JSON-ready payload and the notes it showed), ``ToolResult`` (a call as a
trace records it), and the fitting of a payload into ``Limits.max_chars``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retriever.errors import RetrieverError


class ToolError(RetrieverError):
    """A tool call that cannot be answered; the message says why and what to do instead."""


@dataclass(frozen=True)
class Limits:
    """Caps on what one tool call may return or cost."""

    max_chars: int = 6000  # serialised JSON of one result (~1,500 tokens)
    snippet_chars: int = 300  # of each search hit
    sql_rows: int = 50
    sql_seconds: float = 5.0
    sql_memory_mb: int = 768  # a query's worker may grow by this much (`sqlworker`: RLIMIT_AS, DuckDB's own limit)
    cell_chars: int = 400  # of one SQL value
    query_chars: int = 10_000  # of one SQL statement
    context_chars: int = 300  # of one linking sentence
    max_neighbours: int = 40  # per direction


@dataclass(frozen=True)
class Shown:
    """One tool's answer: the payload the model reads, and the notes it showed (ids, in order, each once) with
    the headings it showed of each, kept typed so no reader parses them back out of the payload's text."""

    payload: dict[str, Any]
    notes: tuple[str, ...] = ()
    headings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult:
    """One call as a trace records it: ``text`` is what the model reads (JSON, or ``Error: ...``)."""

    tool: str
    arguments: dict[str, Any]
    text: str
    is_error: bool
    ms: float
    notes: tuple[str, ...] = ()  # ids of the notes the result showed the model, in order (for "notes read")
    headings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # note id -> headings it showed

    @property
    def chars(self) -> int:
        return len(self.text)


def fit(payload: dict[str, Any], cap: int, hint: str, *keys: str) -> dict[str, Any]:
    """Drop items from the end of the lists ``payload[key]``, key by key, until the JSON fits ``cap``."""
    notes = []
    for key in keys:
        if size(payload) <= cap:
            break
        items = payload[key]
        total, payload[key] = len(items), []
        room = cap - size(payload) - 200  # what the list may take, leaving room for the note
        kept, used = [], 0
        for item in items:
            used += len(dumps(item)) + 2
            if used > room:
                break
            kept.append(item)
        payload[key] = kept
        notes.append(f"{key}: showing {len(kept)} of {total}")
        payload["truncated"] = f"{'; '.join(notes)} to fit {cap} chars; {hint}"
    if size(payload) > cap:
        raise ToolError(f"the result does not fit {cap} characters: {hint}")
    return payload


def fit_text(payload: dict[str, Any], cap: int, hint: str) -> dict[str, Any]:
    """Cut ``payload["text"]`` until the JSON fits ``cap``, saying so in ``truncated``."""
    text = payload["text"]
    room = cap - size({**payload, "text": ""}) - 200
    if room <= 0:
        raise ToolError(f"the note's fields alone pass {cap} characters: {hint}")
    if len(dumps(text)) > room + 2:
        cut = text[:room]
        while len(dumps(cut)) > room and cut:
            cut = cut[: int(len(cut) * 0.9)]
        payload["text"] = cut
        payload["truncated"] = f"text cut at {len(cut)} of {len(text)} characters; {hint}"
    return payload


def clip(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def dumps(value: Any) -> str:
    """A payload as the model reads it."""
    return json.dumps(value, ensure_ascii=False, default=str)


def size(payload: Mapping[str, Any]) -> int:
    return len(dumps(payload))
