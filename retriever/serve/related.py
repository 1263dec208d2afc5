"""``GET /related/{id}``: the notes related to one note, each with why: the notes the engine finds for its title
and opening text ("similar text"), its link neighbours ("links here", "linked from here") and the notes it names
without linking them ("named here without a link"); the note itself excluded."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from retriever.retrieve import DEFAULT_SPEC, Mode
from retriever.serve.library import NotFound, Served
from retriever.serve.views import body_of, note_json, obsidian_uri, vault_name

OPENING = 400  # characters of the note's text the search reads besides its title


def related_json(served: Served, note: str, k: int) -> dict[str, Any]:
    shown = note_json(served, note)
    cid = shown["note_id"]
    why: dict[str, list[str]] = {}
    score: dict[str, float] = {}
    snapshot = served.current()
    if snapshot.retriever is not None:
        question = f"{shown['title']}\n{body_of(shown['text'])[:OPENING]}"
        spec = replace(DEFAULT_SPEC, mode=Mode.VECTOR, k=k + 1)
        for hit in snapshot.retriever.search(question, spec).hits:
            if hit.note_id != cid:
                why.setdefault(hit.note_id, []).append("similar text")
                score[hit.note_id] = hit.score
    for entry in shown["links_in"]:
        why.setdefault(entry["note_id"], []).append("links here")
    for entry in shown["links_out"]:
        why.setdefault(entry["note_id"], []).append("linked from here")
    named = served.tools.select("SELECT DISTINCT target_id FROM mentions WHERE source_id = ? AND target_id <> ?",
                                [cid, cid])  # fmt: skip
    for (target,) in named:
        why.setdefault(target, []).append("named here without a link")
    if not why:
        return {"note_id": cid, "related": []}
    rows = served.tools.select("SELECT id, title, vault_path FROM concepts WHERE list_contains(?, id)", [list(why)])
    known = {r[0]: r for r in rows}
    vault = vault_name(served)
    ranked = sorted((n for n in why if n in known), key=lambda n: (-len(why[n]), -score.get(n, 0.0), n))[:k]
    related = [{"note_id": n, "title": known[n][1], "vault_path": known[n][2],
                "obsidian_uri": obsidian_uri(vault, known[n][2]), "score": score.get(n, 0.0), "why": why[n]}
               for n in ranked]  # fmt: skip
    if not related and cid not in known and not rows:
        raise NotFound(f"no note {note!r}")
    return {"note_id": cid, "related": related}
