"""What the endpoints answer, as JSON-ready payloads (docs/API.md): the request bodies read and checked, the
search hits, a note rendered, the link-health report, the health of the served bundles."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from retriever.agent.tools.notes import SPACE
from retriever.agent.tools.results import clip
from retriever.chunk import BLOCK_ANCHOR, split_header
from retriever.filters import NoteFilter
from retriever.retrieve import DEFAULT_SPEC, Hit, Retrieval, SearchSpec
from retriever.serve.library import BadRequest, NotFound, Served

MAX_QUESTION = 2000  # characters
MAX_K = 100
MAX_PASSAGE = 10_000  # tokens
PASSAGE_FIELDS = ("passage", "seed_passage")  # tokens a note hands over (`SearchSpec.passage`)
MAX_NOTE_REF = 1000  # characters of the note `explain` names
SNIPPET_CHARS = 300
SPEC_FIELDS = ("mode", "seeds", "ranker", "sessions", "mentions", "named", "dedup", "threads", "phrases", "runs",
               "mention_edges", "entities", "entity_rank", "scale_seeds",
               "twins", "passage_sessions")  # fmt: skip
BUDGET_FIELDS = {"max_notes": "notes", "max_tokens": "tokens", "match_vector": "match"}
FILTER_KEYS = {"type": list, "tag": list, "folder": list, "since": str, "until": str}


@dataclass(frozen=True)
class Query:
    """A `/search` or `/ask` body, checked: the question, the bundle it names and the search to run."""

    question: str
    bundle: str | None
    spec: SearchSpec
    filters: NoteFilter
    explain: str | None = None  # a note to explain (`search --explain`): where it ranked, what cut it


def read_query(body: Any) -> Query:
    """The body of `/search` and `/ask`; BadRequest saying which field is wrong and how."""
    if not isinstance(body, dict):
        raise BadRequest('the body must be a JSON object: {"question": "..."}')
    question = body.get("question")
    if not isinstance(question, str) or not question.strip():
        raise BadRequest('"question" is missing or empty: ask something')
    if len(question) > MAX_QUESTION:
        raise BadRequest(f'"question" is {len(question)} characters; at most {MAX_QUESTION}')
    bundle = body.get("bundle")
    if bundle is not None and not isinstance(bundle, str):
        raise BadRequest('"bundle" must be a string: a name from /health')
    known = {"question", "bundle", "k", *PASSAGE_FIELDS, "filters", "explain", *SPEC_FIELDS, *BUDGET_FIELDS}
    unknown = sorted(set(body) - known)
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}: the fields are {', '.join(sorted(known))}")
    explain = body.get("explain")
    if explain is not None and (not isinstance(explain, str) or not explain.strip() or len(explain) > MAX_NOTE_REF):
        raise BadRequest(f'"explain" must be a note id, title or vault path (1 to {MAX_NOTE_REF} characters)')
    filters = read_filters(body.get("filters"))
    return Query(question, bundle, replace(read_spec(body), filters=filters), filters, explain)


def read_spec(body: Mapping[str, Any]) -> SearchSpec:
    """The search the body asks for: the default search (``DEFAULT_SPEC``) with the fields it names changed."""
    from retriever.errors import RetrieverError

    changes: dict[str, Any] = {}
    if "k" in body:
        k = body["k"]
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise BadRequest(f'"k" must be an integer from 1 to {MAX_K}')
        changes["k"] = k
    for name in PASSAGE_FIELDS:
        if name in body:
            size = body[name]
            if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_PASSAGE:
                raise BadRequest(f'"{name}" must be an integer from 0 (whole chunks) to {MAX_PASSAGE}')
            changes[name] = size
    for name in SPEC_FIELDS:
        if name in body:
            value = body[name]
            wanted = bool if isinstance(getattr(DEFAULT_SPEC, name), bool) else str
            if not isinstance(value, wanted):
                raise BadRequest(f'"{name}" must be a {"boolean" if wanted is bool else "string"}')
            changes[name] = value
    budget = DEFAULT_SPEC.budget
    for name, attr in BUDGET_FIELDS.items():
        if name in body:
            value = body[name]
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise BadRequest(f'"{name}" must be a non-negative integer or null')
            budget = replace(budget, **{attr: value or None})
    try:
        return replace(DEFAULT_SPEC, **changes, budget=budget)
    except RetrieverError as e:
        raise BadRequest(str(e)) from None


def read_filters(filters: Any) -> NoteFilter:
    """The ``filters`` object (type, tag, folder: lists of strings; since, until: YYYY-MM-DD), as a NoteFilter."""
    from retriever.errors import RetrieverError

    try:
        return NoteFilter.from_json(filters)
    except RetrieverError as e:
        raise BadRequest(str(e)) from None


def obsidian_uri(vault: str | None, vault_path: str) -> str | None:
    """``obsidian://open?vault=NAME&file=PATH`` (without .md), percent-encoded; None without a vault name."""
    if not vault:
        return None
    return f"obsidian://open?vault={quote(vault, safe='')}&file={quote(vault_path.removesuffix('.md'), safe='')}"


def hit_json(hit: Hit, vault: str | None) -> dict[str, Any]:
    """One hit as `/search` and the `sources` event give it (docs/API.md), plus its session label."""
    path, rest = split_header(hit.text, hit.title)
    return {
        "note_id": hit.note_id,
        "title": hit.title,
        "heading": path[-1] if path else "",
        "score": hit.score,
        "via": str(hit.via),
        "seed": hit.seed,
        "snippet": clip(SPACE.sub(" ", BLOCK_ANCHOR.sub("", rest)).strip(), SNIPPET_CHARS),
        "doc_path": hit.doc_path,
        "vault_path": hit.vault_path,
        "obsidian_uri": obsidian_uri(vault, hit.vault_path),
        "tokens": hit.tokens,
        "session_label": hit.session_label,
    }


def search_json(
    query: Query,
    name: str,
    retrieval: Retrieval,
    vault: str | None,
    notices: tuple[str, ...],
    explained: dict[str, Any] | None = None,
) -> dict:
    """The `/search` answer; with ``explained`` (the body's ``explain``), the note's ``Explanation.to_json``."""
    return {
        "question": query.question,
        "bundle": name,
        "mode": str(retrieval.mode),
        "k": query.spec.k,
        "ranker": retrieval.ranker,
        "notes": retrieval.notes,
        "tokens": retrieval.tokens,
        "left_out": retrieval.left_out,
        "timings_ms": retrieval.timings,
        "hits": [hit_json(h, vault) for h in retrieval.hits],
        "notices": list(notices),
        **({"explain": explained} if explained is not None else {}),
    }


def vault_name(served: Served) -> str | None:
    """The name of the vault the served bundle was converted from (read once per generation)."""
    return served.current().vault


NOTE_FIELDS = "id, title, type, doc_path, vault_path, frontmatter"


def note_json(served: Served, note: str) -> dict[str, Any]:
    """`GET /notes/{id}`: the note's fields, its concept doc as markdown and rendered, and its links both ways."""
    from retriever.agent.tools import ToolError

    tools = served.tools
    tools.follow()
    try:
        note_id = tools.notes.resolve(note)
    except ToolError as e:
        raise NotFound(str(e)) from None
    rows = tools.select(f"SELECT {NOTE_FIELDS} FROM concepts WHERE id = ?", [note_id])
    if not rows:
        raise NotFound(f"no note {note!r} in bundle {served.name}")
    cid, title, kind, doc_path, vault_path, frontmatter = rows[0]
    try:
        text = body_of(tools.notes.doc(doc_path))
    except ToolError as e:
        raise NotFound(str(e)) from None
    vault = vault_name(served)
    linked = "SELECT DISTINCT c.id, c.title, c.vault_path FROM links l JOIN concepts c ON c.id = l.{other} "
    linked += "WHERE l.{this} = ? AND c.id <> ? ORDER BY c.title, c.id"
    out = tools.select(linked.format(other="target_id", this="source_id"), [cid, cid])
    back = tools.select(linked.format(other="source_id", this="target_id"), [cid, cid])
    return {
        "note_id": cid,
        "title": title,
        "type": kind,
        "frontmatter": json.loads(frontmatter or "{}"),
        "text": text,
        "html": render(text),
        "doc_path": doc_path,
        "vault_path": vault_path,
        "obsidian_uri": obsidian_uri(vault, vault_path),
        "links_out": [{"note_id": i, "title": t, "vault_path": v} for i, t, v in out],
        "links_in": [{"note_id": i, "title": t, "vault_path": v} for i, t, v in back],
    }


def body_of(doc: str) -> str:
    """The concept doc without its YAML frontmatter (the fields come from the database)."""
    if doc.startswith("---\n"):
        end = doc.find("\n---\n", 4)
        if end != -1:
            return doc[end + 5 :].lstrip("\n")
    return doc


_ANCHOR_MARK = "\u2063anchor:{}\u2063"
_ANCHOR_ID = re.compile(r'<a id="([a-z0-9-]+)"></a>')
_MARKED = re.compile("\u2063anchor:([a-z0-9-]+)\u2063")


def render(text: str) -> str:
    """The doc as HTML: raw HTML in notes escaped (never run), every heading with an ``id`` (its slug) and a
    ``data-heading`` (its text), every block anchor ``<a id="...">`` the converter wrote kept as an anchor."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    marked = _ANCHOR_ID.sub(lambda m: _ANCHOR_MARK.format(m.group(1)), text)
    tokens = md.parse(marked)
    used: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            heading = SPACE.sub(" ", tokens[i + 1].content).strip()
            slug = slugify(heading) or "section"
            used[slug] = used.get(slug, 0) + 1
            tok.attrSet("id", slug if used[slug] == 1 else f"{slug}-{used[slug] - 1}")
            tok.attrSet("data-heading", heading)
    html = md.renderer.render(tokens, md.options, {})
    return _MARKED.sub(lambda m: f'<a id="{m.group(1)}" class="block-anchor"></a>', html)


def slugify(heading: str) -> str:
    """A heading's anchor: lower case, words joined by "-", punctuation dropped (as GitHub and Obsidian do)."""
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", heading.casefold()).strip())


def links_json(served: Served, note: str | None) -> dict[str, Any]:
    """`GET /links`: the bundle's link-health.json, or only its entries whose source is the note ``note``."""
    path = served.bundle / "link-health.json"
    try:
        report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise NotFound(f"no readable link-health report in {served.name} ({e}): convert it again") from None
    if not note:
        return report
    return {key: _only(value, note) for key, value in report.items()}


def _only(value: Any, note: str) -> Any:
    """The part of one report field about links from ``note`` (vault path): entries whose ``at`` names it; in an
    object of such lists (the unlinked mentions: ``by_note``), each list the same way, with ``total`` and ``notes``
    counted again over what is kept."""
    if isinstance(value, dict) and isinstance(value.get("by_note"), list):
        kept_notes = _only(value["by_note"], note)
        total = sum(int(n.get("count", 0)) for n in kept_notes if isinstance(n, dict))
        return {**value, "by_note": kept_notes, "notes": len(kept_notes), "total": total}
    if not isinstance(value, list):
        return value
    kept: list[Any] = []
    for entry in value:
        if isinstance(entry, dict) and isinstance(entry.get("at"), list):
            at = [a for a in entry["at"] if isinstance(a, str) and a.rsplit(":", 1)[0] == note]
            if at:
                kept.append({**entry, "count": len(at), "at": at} if "count" in entry else {**entry, "at": at})
        elif isinstance(entry, dict) and ("path" in entry or "note" in entry):
            if entry.get("path", entry.get("note")) == note:
                kept.append(entry)
        elif entry == note:
            kept.append(entry)
    return kept
