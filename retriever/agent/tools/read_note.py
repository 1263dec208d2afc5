"""``read_note``: one note's fields and text, or one section of it."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import unquote

from retriever.agent.tools.context import ToolContext
from retriever.agent.tools.declare import Arg
from retriever.agent.tools.notes import doc_body, section, sections
from retriever.agent.tools.results import Shown, fit_text

FIELDS = "id, type, title, description, doc_path, tags, aliases, session_date, session_number, frontmatter"


def read_note(
    ctx: ToolContext,
    id: Annotated[str, Arg("Note id from search, neighbours or sql.", max_length=300)],  # noqa: A002 - its word
    heading: Annotated[str | None, Arg("A section heading of the note (optional).", max_length=200)] = None,
) -> Shown:
    """Read one note (concept doc) by id, e.g. 'Sessions/Session 3'; with heading, only that section. Returns its
    type, title, description, section headings and text."""
    note_id = ctx.notes.resolve(id)
    if heading is None and "#" in id:  # 'Note#Heading', as links write it (Obsidian allows no '#' in names)
        heading = unquote(id.split("#", 1)[1]).replace("-", " ") or None
    row = ctx.select(f"SELECT {FIELDS} FROM concepts WHERE id = ?", [note_id])[0]
    text = doc_body(ctx.notes.doc(row[4]))
    parts = sections(text)
    headings = [title for title, _, _ in parts if title]
    payload: dict[str, Any] = {
        "id": row[0], "type": row[1], "title": row[2], "description": row[3], "doc_path": row[4],
        "tags": row[5], "aliases": row[6], "session_date": row[7], "session_number": row[8],
        "properties": json.loads(row[9] or "{}"), "headings": headings,
    }  # fmt: skip
    if heading:
        text = section(parts, heading, note_id, headings)
        payload["heading"] = heading
    payload["text"] = text
    hint = "read one section with heading=... (see headings)" if headings else "use sql on concepts.body"
    return Shown(fit_text(payload, ctx.limits.max_chars, hint), (row[0],), {row[0]: tuple(headings)})
