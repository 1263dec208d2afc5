"""What the commands print, in one place: hits, answers with their sources, the context an answer was given,
notices. Every command that shows a search or an answer (``search``, ``ask``, ``chat``) prints through these, so a
command never imports another command."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a search prints through here too, and imports nothing of the answer stage
    from retriever.answer.contract import Answer
    from retriever.retrieve import Hit, Retrieval


# C0 controls but newline and tab (ESC starts the terminal's escape sequences; CR rewrites the line), DEL, C1,
# and the bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069), which reorder what follows them on
# the line so a name can show other text than it holds
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal(text: str) -> str:
    """``text`` safe to print on a terminal: every control character but newline and tab written as its escape
    (``\\u001b``), so a file name or title from a vault cannot move the cursor, clear the screen, retitle the
    window or hide text, and still shows what it holds. JSON stays JSON: a control character can only stand in
    one of its strings, where ``\\u001b`` is the escape JSON itself uses."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """``terminal(text)`` on stdout (stderr: ``err``), flushed: how every command prints what holds names or text
    from a vault. What ``typer.echo`` writes, without importing typer (a served search prints through here before
    typer loads): the text holds no escape sequence to strip, and a stream that cannot encode it is given to
    ``typer.echo``, which writes it as its encoding allows."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:  # no console (pythonw): nothing to print to
        return
    line = terminal(text) + ("\n" if nl else "")
    try:
        stream.write(line)
    except UnicodeEncodeError:
        import typer

        typer.echo(line, err=err, nl=False)
    stream.flush()


def notes(lines: Iterable[str | None]) -> None:
    """Each non-empty notice as one ``note:`` line on stderr."""
    for line in lines:
        if line:
            echo(f"note: {line}", err=True)


def hit_lines(retrieval: Retrieval) -> list[str]:
    """A header, then one line per hit: rank, via, its score in the column of its stage (a vector hit's cosine
    and a hop hit's ranker score are different scales, so never one column), tokens, vault path (``search``
    and chat's ``/search`` and ``/sources``)."""
    lines = ["  #  via     vector     hop  tokens  note"]
    for rank, hit in enumerate(retrieval.hits, start=1):
        score = f"{hit.score:7.3f}"
        vector, hop = (score, "") if hit.via == "vector" else ("", score)
        lines.append(f"{rank:>3}. {hit.via:<6} {vector:>7} {hop:>7} {hit.tokens:>5} tok  {terminal(hit.vault_path)}")
    return lines


def print_search(
    question: str, retrieval: Retrieval, spec: Any, as_json: bool, explained: dict[str, Any] | None
) -> None:
    """What ``search`` prints of a retrieval (in process or from a server): the budget's notice, then the hits as
    JSON or as lines, then the ``--explain`` explanation."""
    import json

    from retriever.spec import left_out_notice

    notes([left_out_notice(retrieval, spec.budget)])
    if as_json:
        payload = {"question": question, "mode": retrieval.mode, "k": spec.k, "ranker": retrieval.ranker,
                   "notes": retrieval.notes, "tokens": retrieval.tokens, "left_out": retrieval.left_out,
                   "timings_ms": retrieval.timings, "hits": [h.to_json() for h in retrieval.hits]}  # fmt: skip
        if explained is not None:
            payload["explain"] = explained
        echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    for line in hit_lines(retrieval):
        echo(line)  # `terminal` again changes nothing: hit_lines escaped every control character
    echo(f"{retrieval.notes} notes, {retrieval.tokens} tokens, {retrieval.timings.get('retrieve_ms', 0):.1f} ms")
    if explained is not None:
        from retriever.explain import explanation_lines

        echo("")
        for line in explanation_lines(explained):
            echo(line)  # titles and paths from the vault


def render_sources(answer: Answer) -> list[str]:
    """What follows the streamed answer text: the "Sources" list, or why there is none."""
    if answer.finish_reason == "length" and not answer.text:  # cut off: what was streamed is no answer
        return ["", f"({answer.flag})"]
    if answer.not_found:
        return []
    if not answer.citations:
        return ["", "(unsupported: this answer cites no note of its context — do not rely on it)"]
    lines = ["", f"(unsupported: {answer.flag} — do not rely on it)"] if answer.flag else []
    lines += ["", "Sources:"]
    for number, c in enumerate(answer.citations, start=1):
        anchor = f"#{c.heading}" if c.heading else ""
        quote = f': "{clip(c.quote)}"' if c.quote and c.quote not in answer.text else ""  # extract quoted it
        lines.append(terminal(f"  [{number}] {c.label}{quote} — {c.path}{anchor}"))
    return lines


def context_lines(answer: Answer | None, hits: Sequence[Hit]) -> list[str]:
    """The notes the answer was given, each once, in context order: how it came (vector or hop) and, for a
    cited note, the numbers of its citations in the Sources list (none before the answer: ``answer`` None)."""
    cited: dict[str, list[str]] = {}
    for number, c in enumerate(answer.citations if answer else (), start=1):
        cited.setdefault(c.note_id, []).append(f"[{number}]")
    seen: set[str] = set()
    lines = [f"Context ({len({h.note_id for h in hits})} notes):"]
    for hit in hits:
        if hit.note_id in seen:
            continue
        seen.add(hit.note_id)
        mark = f"cited {' '.join(cited[hit.note_id])}" if hit.note_id in cited else ""
        lines.append(terminal(f"  {mark:<12} {hit.via:<6} {hit.title} ({hit.doc_path})"))
    return lines


def clip(text: str, most: int = 200) -> str:
    """A quote for one line: its first ``most`` characters, cut at a word, with "…"."""
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most].rsplit(" ", 1)[0] + " …"


def print_token(token: str) -> None:
    """A piece of a streamed answer, shown at once."""
    sys.stdout.write(terminal(token))
    sys.stdout.flush()
