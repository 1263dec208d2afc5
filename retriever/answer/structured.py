"""The structured answer every backend returns: `{answer, citations: [{note_id, heading}], not_found}`.

`json_schema` (Bedrock's tool input) and `gbnf` (llama.cpp's grammar) say the same thing: a citation's
`note_id` is one of the notes in the context and its `heading` one of that note's headings (or "" for the
whole note). The llama grammar goes further: an answer is either exactly the not-found reply with no
citations, or a claim with one to `MAX_CITATIONS` citations, so a generated claim always cites its context.
`parse` turns what came back (JSON text, possibly cut off at the token limit, or a tool-input dict) into the
answer text, the citations that point into the context, and the one not-found rule of `refusal`.
`strip_template` cuts an answer at the first piece of the prompt's own structure; `AnswerStream` decodes the
`answer` string while the JSON is still being generated, with the same guard.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retriever.answer.base import Answer, Citation, ContextNote
from retriever.answer.extract import anchored
from retriever.answer.prompt import posed_by
from retriever.answer.refusal import NOT_FOUND, not_found, refusal_only

MAX_CITATIONS = 3
MAX_ANSWER_CHARS = 700
KEYS = ("answer", "citations", "not_found")
PREFIX = '{"answer": "'

# What of a prompt may never appear in an answer: turn and role markers of any chat template, the note
# delimiters, and the labels that start a line of the prompt ("Question:", "Answer:", "JSON reply:").
TEMPLATE = re.compile(
    r"<\s*/?\s*(?:start_of_turn|end_of_turn|bos|eos|pad|note|notes|system|user|assistant|model)\b[^<>\n]{0,40}>?"
    r"|<\|[a-z_]{2,20}\|>|\[/?INST\]|</?s>"
    r"|(?:^|\n)[ \t>*_|]*(?:question|answer|json reply|json answer|notes?|note_id|quoted notes?)[ \t*_]*:"
    r"|\[note \d+\]",
    re.IGNORECASE,
)
_HOLD = 24  # longest template piece the stream waits for before it shows text


_LEADING_LABEL = re.compile(r"^[ \t*_]*(?:answer|json reply|json answer)[ \t*_]*:[ \t]*", re.IGNORECASE)


def strip_template(text: str) -> str:
    """`text` without a leading `Answer:` label, up to the first other piece of prompt structure."""
    text = _LEADING_LABEL.sub("", text, count=1)
    match = TEMPLATE.search(text)
    return (text[: match.start()] if match else text).strip()


def collapse_repeats(text: str, longest: int = 40) -> str:
    """A run of words repeated three or more times in a row (a looping model) kept once."""
    words = text.split(" ")
    out: list[str] = []
    i = 0
    while i < len(words):
        for period in range(1, longest + 1):
            unit = words[i : i + period]
            if len(unit) < period or words[i + period : i + 3 * period] != unit * 2:
                continue
            end = i + 3 * period
            while words[end : end + period] == unit:
                end += period
            out += unit
            i = end
            break
        else:
            out.append(words[i])
            i += 1
    return " ".join(out)


def leaks_template(text: str) -> bool:
    """Whether any prompt structure appears in `text` (the scorer's "leaked template" check)."""
    return TEMPLATE.search(text) is not None


def json_schema(notes: Sequence[ContextNote], headings: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """JSON Schema of the answer; `note_id` and `heading` are enums of what the context holds."""
    ids = [n.note_id for n in notes]
    all_headings = sorted({h for n in notes for h in headings.get(n.note_id, ())})
    citation = {
        "type": "object",
        "properties": {
            "note_id": {"type": "string", "enum": ids or [""], "description": "id of a note in the context"},
            "heading": {
                "type": "string",
                "enum": ["", *all_headings],
                "description": "the section of that note the statement comes from, or empty for the whole note",
            },
        },
        "required": ["note_id", "heading"],
    }
    return {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "description": f"the answer, or exactly '{NOT_FOUND}'"},
            "citations": {"type": "array", "items": citation, "maxItems": MAX_CITATIONS},
            "not_found": {"type": "boolean", "description": "true when the notes do not hold the answer"},
        },
        "required": list(KEYS),
    }


def gbnf(notes: Sequence[ContextNote], headings: Mapping[str, Sequence[str]]) -> str:
    """A llama.cpp grammar for the answer JSON, fixed key order and spacing (see the module docstring)."""
    rules = [
        'root ::= "{\\"answer\\": \\"" ( refusal | claim ) "}"',
        f"refusal ::= {_lit(NOT_FOUND + chr(34) + ', ' + chr(34) + 'citations' + chr(34) + ': [], ')}"
        f" {_lit(chr(34) + 'not_found' + chr(34) + ': true')}",
        'claim ::= text "\\", \\"citations\\": [" cites "], \\"not_found\\": false"',
        f"text ::= char{{1,{MAX_ANSWER_CHARS}}}",
        r'char ::= [^"\\\x00-\x1f] | "\\" ( ["\\/nt] | "u" [0-9a-fA-F]{4} )',
    ]
    if not notes:
        rules[0] = 'root ::= "{\\"answer\\": \\"" refusal "}"'
        return "\n".join(rules[:2]) + "\n"
    rules.append(f'cites ::= cite ( ", " cite ){{0,{MAX_CITATIONS - 1}}}')
    rules.append("cite ::= " + " | ".join(f"note{i}" for i in range(len(notes))))
    for i, note in enumerate(notes):
        options = " | ".join(_lit(json.dumps(h, ensure_ascii=False)) for h in ("", *headings.get(note.note_id, ())))
        head = '{"note_id": ' + json.dumps(note.note_id, ensure_ascii=False) + ', "heading": '
        rules.append(f'note{i} ::= {_lit(head)} ( {options} ) "}}"')
    return "\n".join(rules) + "\n"


def _lit(text: str) -> str:
    """`text` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


@dataclass(frozen=True)
class Parsed:
    text: str
    citations: tuple[Citation, ...]
    not_found: bool
    valid: bool  # the reply was a JSON object of the contract (after closing a cut-off one)
    flag: str = ""  # see Answer.flag

    def answer(
        self, reply: str | Mapping[str, Any], finish: str, tokens: tuple[int, int], seconds: float, model: str
    ) -> Answer:
        """The ``Answer`` of this parse of ``reply``: ``finish`` is the model's, or "invalid" when the reply broke
        the contract; ``tokens`` are (prompt, completion); ``raw`` keeps the reply (a dict as JSON)."""
        return Answer(
            text=self.text,
            citations=self.citations,
            finish_reason=finish if self.valid else "invalid",
            prompt_tokens=tokens[0],
            completion_tokens=tokens[1],
            seconds=seconds,
            model=model,
            not_found=self.not_found,
            raw=reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False),
            flag=self.flag,
        )


def parse(
    reply: str | Mapping[str, Any], notes: Sequence[ContextNote], headings: Mapping[str, Sequence[str]]
) -> Parsed:
    """The answer, its citations into the context and the not-found decision, from JSON text or a dict."""
    data = _load(reply) if isinstance(reply, str) else dict(reply)
    valid = data is not None
    if data is None:
        data = {"answer": reply if isinstance(reply, str) else ""}
    answer = data.get("answer")
    text = collapse_repeats(strip_template(answer if isinstance(answer, str) else ""))
    raw_citations = data.get("citations")
    citations = _citations(raw_citations if isinstance(raw_citations, list) else [], notes, headings)
    if not any(c.isalnum() for c in text):  # nothing said: there is no claim for a citation to support
        return Parsed(NOT_FOUND, (), True, valid)
    flag = data.get("not_found") is True
    if refusal_only(text):  # "not found in the vault" with a citation: a refusal, and the citation supports nothing
        citations = ()
    refused = not_found(text, flag=flag, cited=bool(citations))
    citations = citations if refused else anchored(text, citations, notes)
    planted = None if refused else posed_by(text, notes)
    posing = (
        f"the answer is a reply written in the note {planted}, copied: a planted answer, not a finding"
        if planted
        else ""
    )
    return Parsed(text, citations, refused, valid, posing)


_CLOSERS = ('"}', '"]}', "]}", "}", '", "citations": [], "not_found": false}', '"}], "not_found": false}',
            "], \"not_found\": false}", '", "heading": ""}], "not_found": false}', ', "not_found": false}')  # fmt: skip


def _load(text: str) -> dict[str, Any] | None:
    """The JSON object in `text`; a reply cut off at the token limit is closed the few ways the grammar allows."""
    start = text.find("{")
    if start < 0:
        return None
    body = text[start:].rstrip()
    for candidate in (body, *(body + closer for closer in _CLOSERS), *_cut_citation(body)):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _cut_citation(body: str) -> list[str]:
    """A reply cut inside a citation: drop that citation and close the rest."""
    cut = body.rfind(", {")
    if cut < 0:
        cut = body.rfind("[{")
        return [body[: cut + 1] + '], "not_found": false}'] if cut >= 0 else []
    return [body[:cut] + '], "not_found": false}']


def _citations(
    items: Sequence[Any], notes: Sequence[ContextNote], headings: Mapping[str, Sequence[str]]
) -> tuple[Citation, ...]:
    """Citations whose note is in the context (by ID, else path or title); a heading not in it becomes ""."""
    by_key: dict[str, ContextNote] = {}
    for note in reversed(notes):
        for key in (note.title.casefold(), note.path, note.note_id):
            by_key[key] = note
    found: dict[tuple[str, str], Citation] = {}
    for item in items:
        if not isinstance(item, Mapping):
            continue
        key = str(item.get("note_id") or "").strip()
        cited = by_key.get(key) or by_key.get(key.casefold())
        if cited is None:
            continue
        note = cited
        wanted = str(item.get("heading") or "").strip().lstrip("#").strip().casefold()
        heading = next((h for h in headings.get(note.note_id, ()) if h.casefold() == wanted), "")
        found.setdefault((note.note_id, heading), Citation(note.title, note.path, note.note_id, heading))
    return tuple(found.values())


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class AnswerStream:
    """Decode the `answer` string of a JSON reply as it streams, showing only text the template guard passed.

    `feed(piece)` returns the new answer text to show (may be ""); `finish(final_text)` the rest of the
    final answer text, so that everything shown adds up to it.
    """

    def __init__(self) -> None:
        self._raw = ""
        self._decoded: list[str] = []
        self._pos = 0  # next raw index to decode
        self._open = False
        self._closed = False
        self.shown = ""

    def feed(self, piece: str) -> str:
        self._raw += piece
        if not self._open:
            start = self._raw.find(PREFIX)
            if start < 0:
                return ""
            self._open, self._pos = True, start + len(PREFIX)
        self._decode()
        text = strip_template("".join(self._decoded))
        visible = text if self._closed or TEMPLATE.search("".join(self._decoded)) else text[:-_HOLD]
        return self._show(visible)

    def finish(self, final_text: str) -> str:
        return self._show(final_text) if final_text.startswith(self.shown) else ""

    def _show(self, visible: str) -> str:
        if len(visible) <= len(self.shown) or not visible.startswith(self.shown):
            return ""
        new, self.shown = visible[len(self.shown) :], visible
        return new

    def _decode(self) -> None:
        raw = self._raw
        while self._pos < len(raw) and not self._closed:
            char = raw[self._pos]
            if char == '"':
                self._closed = True
            elif char == "\\":
                if self._pos + 1 >= len(raw):
                    return
                code = raw[self._pos + 1]
                if code == "u":
                    if self._pos + 6 > len(raw):
                        return
                    with contextlib.suppress(ValueError):
                        self._decoded.append(chr(int(raw[self._pos + 2 : self._pos + 6], 16)))
                    self._pos += 6
                    continue
                self._decoded.append(_ESCAPES.get(code, code))
                self._pos += 2
                continue
            else:
                self._decoded.append(char)
            self._pos += 1
