"""The OpenAPI 3.1 document of the server (``GET /openapi.json``), written from docs/API.md; a test checks that it
names exactly the routes the app serves, and that the answers match its schemas' required fields."""

from __future__ import annotations

from typing import Any

from retriever.serve.views import (
    FILTER_KEYS,
    MAX_K,
    MAX_NOTE_REF,
    MAX_PASSAGE,
    MAX_QUESTION,
    PASSAGE_FIELDS,
    SPEC_FIELDS,
)

STR = {"type": "string"}
NULLABLE_STR = {"type": ["string", "null"]}
INT = {"type": "integer"}
ERROR = {"type": "object", "required": ["error"], "properties": {"error": STR}}
HIT = {
    "type": "object",
    "required": ["note_id", "title", "heading", "score", "via", "seed", "snippet", "doc_path", "vault_path",
                 "obsidian_uri", "tokens"],
    "properties": {
        "note_id": STR, "title": STR, "heading": STR, "score": {"type": "number"},
        "via": {"type": "string", "enum": ["vector", "hop"]}, "seed": NULLABLE_STR, "snippet": STR,
        "doc_path": STR, "vault_path": STR, "obsidian_uri": NULLABLE_STR, "tokens": INT,
        "session_label": NULLABLE_STR,
    },
}  # fmt: skip
QUERY = {
    "type": "object",
    "required": ["question"],
    "additionalProperties": False,
    "properties": {
        "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION},
        "bundle": STR,
        "k": {"type": "integer", "minimum": 1, "maximum": MAX_K},
        **{name: {"type": "integer", "minimum": 0, "maximum": MAX_PASSAGE} for name in PASSAGE_FIELDS},
        **{name: ({"type": "boolean"} if name not in ("mode", "seeds", "ranker") else STR) for name in SPEC_FIELDS},
        "max_notes": {"type": ["integer", "null"], "minimum": 0},
        "max_tokens": {"type": ["integer", "null"], "minimum": 0},
        "match_vector": {"type": ["integer", "null"], "minimum": 0},
        "explain": {"type": "string", "minLength": 1, "maxLength": MAX_NOTE_REF,
                    "description": "A note id, title or vault path: the answer's `explain` says where it ranked in "
                    "each stage, what cut it and the nearest setting that keeps it."},
        "filters": {
            "type": "object",
            "additionalProperties": False,
            "properties": {k: ({"type": "array", "items": STR} if t is list else {"type": "string", "format": "date"})
                           for k, t in FILTER_KEYS.items()},
        },
    },
}  # fmt: skip
SEARCH = {
    "type": "object",
    "required": ["question", "bundle", "mode", "k", "notes", "tokens", "left_out", "timings_ms", "hits"],
    "properties": {"question": STR, "bundle": STR, "mode": STR, "k": INT, "notes": INT, "tokens": INT,
                   "left_out": INT, "timings_ms": {"type": "object"}, "hits": {"type": "array", "items": HIT},
                   "explain": {"type": "object", "required": ["note_id", "kept", "stages", "reached", "cut", "why",
                                                              "settings"]}},
}  # fmt: skip
ASK = {
    "type": "object",
    "required": ["question", "answer", "not_found", "supported", "citations", "retrieved", "retrieval", "model",
                 "timings_ms"],
    "properties": {"question": STR, "answer": STR, "not_found": {"type": "boolean"}, "citations": {"type": "array"}},
}  # fmt: skip
LINKED = {"type": "array", "items": {"type": "object", "required": ["note_id", "title", "vault_path"]}}
NOTE = {
    "type": "object",
    "required": ["note_id", "title", "type", "frontmatter", "text", "html", "doc_path", "vault_path", "obsidian_uri",
                 "links_out", "links_in"],
    "properties": {"links_out": LINKED, "links_in": LINKED},
}  # fmt: skip
RELATED = {
    "type": "object",
    "required": ["note_id", "related"],
    "properties": {"related": {"type": "array", "items": {
        "type": "object", "required": ["note_id", "title", "vault_path", "obsidian_uri", "score", "why"]}}},
}  # fmt: skip
HEALTH = {
    "type": "object",
    "required": ["status", "version", "bundles", "models"],
    "properties": {"bundles": {"type": "array", "items": {"type": "object", "required": [
        "name", "path", "vault", "converted_at", "notes", "chunks", "index", "generation"]}}},
}  # fmt: skip


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


ERRORS = {str(code): _json(ERROR, why) for code, why in (
    (400, "bad request"), (401, "missing or wrong token"), (403, "bad Host or Origin"), (404, "no such note or bundle"),
    (413, "body too large"), (504, "over the time limit"))}  # fmt: skip
BUNDLE_PARAM = {"name": "bundle", "in": "query", "required": False, "schema": STR}
NOTE_PARAM = {"name": "note_id", "in": "path", "required": True, "schema": STR,
              "description": "The note id, vault path (Folder/Note.md) or unique title, percent-encoded."}  # fmt: skip


def _op(summary: str, ok: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"summary": summary, "responses": {"200": ok, **ERRORS}, **extra}


def openapi(version: str) -> dict[str, Any]:
    """The document: every route of the app, its body and its answer."""
    body = {"required": True, "content": {"application/json": {"schema": QUERY}}}
    events = "With Accept: text/event-stream, events sources, token..., done (or error)."
    ask_ok = {"description": f"The `ask --json` object. {events}",
              "content": {"application/json": {"schema": ASK}, "text/event-stream": {"schema": STR}}}  # fmt: skip
    html = {"description": "The web page", "content": {"text/html": {"schema": STR}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "vault2okf serve", "version": version},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{}, {"bearer": []}],
        "paths": {
            "/health": {"get": _op("The served bundles, their index and generation; the models", _json(HEALTH, "ok"))},
            "/search": {"post": _op("The notes a question retrieves", _json(SEARCH, "hits"), requestBody=body)},
            "/ask": {"post": _op("An answer from the notes, citing them", ask_ok, requestBody=body)},
            "/notes/{note_id}": {"get": _op("One note: fields, text, HTML, links both ways", _json(NOTE, "the note"),
                                            parameters=[NOTE_PARAM, BUNDLE_PARAM])},
            "/related/{note_id}": {"get": _op("Notes related to one note", _json(RELATED, "related notes"),
                parameters=[NOTE_PARAM, BUNDLE_PARAM, {"name": "k", "in": "query", "schema": INT}])},
            "/links": {"get": _op("The link-health report (of one note with note=)", _json({"type": "object"}, "ok"),
                parameters=[BUNDLE_PARAM, {"name": "note", "in": "query", "schema": STR}])},
            "/openapi.json": {"get": _op("This document", _json({"type": "object"}, "OpenAPI 3.1"))},
            "/": {"get": _op("The web page to ask from", html)},
            "/app.js": {"get": _op("The web page's script", {"description": "JavaScript"})},
            "/app.css": {"get": _op("The web page's style", {"description": "CSS"})},
            "/mcp": {
                "post": _op("MCP over streamable HTTP (JSON-RPC)", {"description": "MCP"}),
                "get": _op("MCP over streamable HTTP (server events)", {"description": "MCP"}),
                "delete": _op("MCP over streamable HTTP (end the session)", {"description": "MCP"}),
            },
        },
    }  # fmt: skip
