"""Citation anchoring: each citation of a model's answer given the passage of its note it rests on, verbatim, so a
reader sees what the claim stands on (``contract.parse`` anchors every backend's citations)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from retriever.answer.passages import passages, terms
from retriever.answer.records import Citation, ContextNote


def anchored(claim: str, citations: Sequence[Citation], notes: Sequence[ContextNote]) -> tuple[Citation, ...]:
    """Each citation with the passage it rests on: the passage of the cited section (the whole note when it names
    none) that shares the most scoring terms with ``claim``, verbatim; none shared, no quote."""
    by_id = {note.note_id: note for note in notes}
    want = set(terms(claim))
    out = []
    for c in citations:
        note = by_id.get(c.note_id)
        best, most = "", 0
        for passage in passages(note) if note is not None and want else ():
            if c.heading and passage.heading != c.heading:
                continue
            shared = len(want & set(passage.terms))
            if shared > most:
                best, most = passage.text, shared
        out.append(replace(c, quote=best))
    return tuple(out)
