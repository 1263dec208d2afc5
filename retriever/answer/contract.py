"""The answer contract: the records every answer backend returns, and one description of an answer.

An answer is one JSON object ``{answer, citations: [{note_id, heading}], not_found}``: a short text, one to
``MAX_CITATIONS`` citations of notes in the context (each with one of that note's headings, or "" for the whole
note), or exactly the not-found reply with no citations. ``ANSWER`` says so once; everything else is derived
from it: ``json_schema`` (Bedrock's answer tool, the agent's answer), with ``strict`` the schema a grammar can
enforce (claim or refusal, never both), ``gbnf`` (llama.cpp's grammar of the single-shot reply), and ``parse``,
which reads what came back (JSON text, possibly cut off, or a tool-input dict) with ``load_json``'s closing of a
cut-off object, keeps the citations that point into the context and applies the one not-found rule of
``refusal``. The agent loop's contract with a backend's model (``Driver``, ``Step``, ``Decision``) is here too,
so a backend module holds its model, its answerer and its driver without importing the loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from retriever.answer.grounding import anchored
from retriever.answer.prompt import posed_by
from retriever.answer.records import Answer, AnswerError, Citation, ContextNote
from retriever.answer.refusal import NOT_FOUND, not_found, refusal_only
from retriever.answer.structured import collapse_repeats, strip_template

__all__ = [  # the records (`records.py`, a leaf every answer module may import) and what is derived here
    "ANSWER", "Answer", "AnswerError", "Answerer", "Citation", "ContextNote", "Decision", "Driver", "OnToken",
    "Parsed", "Shape", "Step", "ToolOutput", "gbnf", "json_schema", "load_json", "parse",
]  # fmt: skip

MAX_CITATIONS = 3
MAX_ANSWER_CHARS = 700
KEYS = ("answer", "citations", "not_found")
PREFIX = '{"answer": "'  # how every structured reply starts (the stream decodes the answer from here)


@dataclass(frozen=True)
class Shape:
    """The one description of an answer: its keys in order, the reply that says "not found", the limits."""

    keys: tuple[str, str, str] = KEYS
    not_found: str = NOT_FOUND
    max_citations: int = MAX_CITATIONS
    max_chars: int = MAX_ANSWER_CHARS

    def refusal(self) -> dict[str, Any]:
        return {self.keys[0]: self.not_found, self.keys[1]: [], self.keys[2]: True}


ANSWER = Shape()
HEADING_DESCRIPTION = "the section of that note the statement comes from, or empty for the whole note"
OnToken = Callable[[str], None] | None  # gets each piece of the answer text as it is generated


class Answerer(Protocol):
    model: str  # the name answers carry (`Answer.model`)
    notice: str | None  # said to the person before the first answer (the tiny packaged model is in use)

    def answer(self, question: str, notes: Sequence[ContextNote], *, on_token: OnToken = None) -> Answer: ...


# -- schemas and the grammar, from ANSWER ---------------------------------------------------------------------


def grammar_safe(text: str) -> bool:
    """Whether llama-cpp-python's schema converter writes ``text`` as an enum literal it can parse back (it
    escapes a quote or backslash in an enum wrongly; such a heading is cited as the whole note instead)."""
    return '"' not in text and "\\" not in text


def json_schema(
    notes: Sequence[ContextNote], headings: Mapping[str, Sequence[str]], *, strict: bool = False
) -> dict[str, Any]:
    """JSON Schema of the answer; ``note_id`` and ``heading`` are enums of what the context holds. With ``strict``,
    what a grammar enforces: exactly the refusal, or a claim citing one to three notes (grammar-safe ids only)."""
    answer, citations, flag = ANSWER.keys
    if strict:
        return _strict_schema(notes, headings)
    every = sorted({h for n in notes for h in headings.get(n.note_id, ())})
    citation = {
        "type": "object",
        "properties": {
            "note_id": {"type": "string", "enum": [n.note_id for n in notes] or [""],
                        "description": "id of a note in the context"},
            "heading": {"type": "string", "enum": ["", *every], "description": HEADING_DESCRIPTION},
        },
        "required": ["note_id", "heading"],
    }  # fmt: skip
    return {
        "type": "object",
        "properties": {
            answer: {"type": "string", "description": f"the answer, or exactly '{ANSWER.not_found}'"},
            citations: {"type": "array", "items": citation, "maxItems": ANSWER.max_citations},
            flag: {"type": "boolean", "description": "true when the notes do not hold the answer"},
        },
        "required": list(ANSWER.keys),
    }


def _strict_schema(notes: Sequence[ContextNote], headings: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    refusal = {
        "type": "object",
        "properties": {key: {"const": value} for key, value in ANSWER.refusal().items()},
        "required": list(ANSWER.keys),
        "additionalProperties": False,
    }
    ids = [n.note_id for n in notes if grammar_safe(n.note_id)]
    if not ids:
        return refusal
    every = sorted({h for n in notes for h in headings.get(n.note_id, ()) if grammar_safe(h)})
    citation = {
        "type": "object",
        "properties": {"note_id": {"enum": ids}, "heading": {"enum": ["", *every]}},
        "required": ["note_id", "heading"],
        "additionalProperties": False,
    }
    answer, citations, flag = ANSWER.keys
    claim = {
        "type": "object",
        "properties": {
            answer: {"type": "string", "minLength": 1, "maxLength": ANSWER.max_chars},
            citations: {"type": "array", "items": citation, "minItems": 1, "maxItems": ANSWER.max_citations},
            flag: {"const": False},
        },
        "required": list(ANSWER.keys),
        "additionalProperties": False,
    }
    return {"anyOf": [claim, refusal]}


def gbnf(notes: Sequence[ContextNote], headings: Mapping[str, Sequence[str]]) -> str:
    """A llama.cpp grammar for the single-shot reply: fixed key order and spacing, the refusal exactly, or a claim
    with one to three citations of the context's notes and their headings."""
    answer, citations, flag = (json.dumps(k) for k in ANSWER.keys)
    rules = [
        f'root ::= {_lit("{" + answer + ": " + chr(34))} ( refusal | claim ) "}}"',
        f"refusal ::= {_lit(ANSWER.not_found + chr(34) + ', ' + citations + ': [], ')} {_lit(flag + ': true')}",
        f"claim ::= text {_lit(chr(34) + ', ' + citations + ': [')} cites {_lit('], ' + flag + ': false')}",
        f"text ::= char{{1,{ANSWER.max_chars}}}",
        r'char ::= [^"\\\x00-\x1f] | "\\" ( ["\\/nt] | "u" [0-9a-fA-F]{4} )',
    ]
    if not notes:
        rules[0] = f'root ::= {_lit("{" + answer + ": " + chr(34))} refusal "}}"'
        return "\n".join(rules[:2]) + "\n"
    rules.append(f'cites ::= cite ( ", " cite ){{0,{ANSWER.max_citations - 1}}}')
    rules.append("cite ::= " + " | ".join(f"note{i}" for i in range(len(notes))))
    for i, note in enumerate(notes):
        options = " | ".join(_lit(json.dumps(h, ensure_ascii=False)) for h in ("", *headings.get(note.note_id, ())))
        head = '{"note_id": ' + json.dumps(note.note_id, ensure_ascii=False) + ', "heading": '
        rules.append(f'note{i} ::= {_lit(head)} ( {options} ) "}}"')
    return "\n".join(rules) + "\n"


def _lit(text: str) -> str:
    """``text`` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


# -- reading a reply ------------------------------------------------------------------------------------------


def load_json(text: str) -> dict[str, Any] | None:
    """The JSON object in ``text``. One cut off (the token limit, a loop stop) is closed as its own brackets say:
    an open string ended, every open array and object closed; when that does not parse (cut inside a key), the
    last unfinished member is dropped and it is closed again. Whatever follows a whole object is ignored."""
    start = text.find("{")
    if start < 0:
        return None
    body = text[start:].rstrip()
    for _ in range(64):  # each round drops one member: a reply has few
        for candidate in (body, _closed(body)):
            try:
                value, _end = json.JSONDecoder().raw_decode(candidate)
            except ValueError:
                continue
            return value if isinstance(value, dict) else None
        cut = _last_member(body)
        if cut <= 0:
            return None
        body = body[:cut].rstrip()
    return None


def _scan(body: str) -> tuple[list[str], bool, list[int]]:
    """The open brackets, whether a string is open, and where each member separator (``,``) outside strings is."""
    stack: list[str] = []
    commas: list[int] = []
    in_string = escaped = False
    for i, char in enumerate(body):
        if in_string:
            escaped = not escaped and char == "\\"
            in_string = escaped or char != '"'
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append(char)
            commas.append(i + 1)  # the first member starts here: dropping it leaves the bracket
        elif char in "]}" and stack:
            stack.pop()
        elif char == ",":
            commas.append(i)
    return stack, in_string, commas


def _closed(body: str) -> str:
    stack, in_string, _ = _scan(body)
    if in_string:
        body = body.removesuffix("\\") + '"'
    body = body.rstrip().removesuffix(",").removesuffix(":")
    return body + "".join("]" if b == "[" else "}" for b in reversed(stack))


def _last_member(body: str) -> int:
    _, _, commas = _scan(body)
    return commas[-1] if commas else -1


@dataclass(frozen=True)
class Parsed:
    text: str
    citations: tuple[Citation, ...]
    not_found: bool
    valid: bool  # the reply was a JSON object of the contract (after closing a cut-off one)
    flag: str = ""  # see Answer.flag
    whole: bool = True  # the reply got past its answer and citations (to the not-found key)

    def answer(
        self, reply: str | Mapping[str, Any], finish: str, tokens: tuple[int, int], seconds: float, model: str
    ) -> Answer:
        """The ``Answer`` of this parse of ``reply``: ``finish`` is the model's, or "invalid" when the reply broke
        the contract; ``tokens`` are (prompt, completion); ``raw`` keeps the reply (a dict as JSON). A reply the
        token limit cut before its answer and citations ended is no answer: empty, flagged as cut, with why."""
        raw = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        if finish == "length" and not self.whole:
            return Answer(
                text="", citations=(), finish_reason="length", prompt_tokens=tokens[0], completion_tokens=tokens[1],
                seconds=seconds, model=model, raw=raw, flag=CUT.format(tokens=tokens[1]),
            )  # fmt: skip
        return Answer(
            text=self.text,
            citations=self.citations,
            finish_reason=finish if self.valid else "invalid",
            prompt_tokens=tokens[0],
            completion_tokens=tokens[1],
            seconds=seconds,
            model=model,
            not_found=self.not_found,
            raw=raw,
            flag=self.flag,
        )


CUT = (
    "not answered: the reply was cut off at {tokens} tokens (the --answer-tokens limit) before its answer and "
    "citations ended — raise --answer-tokens"
)


def parse(
    reply: str | Mapping[str, Any], notes: Sequence[ContextNote], headings: Mapping[str, Sequence[str]]
) -> Parsed:
    """The answer, its citations into the context and the not-found decision, from JSON text or a dict."""
    answer_key, citations_key, flag_key = ANSWER.keys
    data = load_json(reply) if isinstance(reply, str) else dict(reply)
    valid = data is not None
    whole = _past_citations(reply, data)
    if data is None:
        data = {answer_key: reply if isinstance(reply, str) else ""}
    answer = data.get(answer_key)
    text = collapse_repeats(strip_template(answer if isinstance(answer, str) else ""))
    raw_citations = data.get(citations_key)
    citations = _citations(raw_citations if isinstance(raw_citations, list) else [], notes, headings)
    if not any(c.isalnum() for c in text):  # nothing said: there is no claim for a citation to support
        return Parsed(ANSWER.not_found, (), True, valid, whole=whole)
    flag = data.get(flag_key) is True
    if refusal_only(text):  # "not found in the vault" with a citation: a refusal, and the citation supports nothing
        citations = ()
    refused = not_found(text, flag=flag, cited=bool(citations))
    citations = citations if refused else anchored(text, citations, notes)
    planted = None if refused else posed_by(text, notes)
    posing = f"the answer is a reply written in the note {planted}, copied: a planted answer, not a finding"
    return Parsed(text, citations, refused, valid, posing if planted else "", whole)


def _past_citations(reply: str | Mapping[str, Any], data: Mapping[str, Any] | None) -> bool:
    """Whether the reply got past its answer and its citations: they are both in it and, for JSON text, the
    text ends back in the top object (a cut inside the last key leaves them whole; one inside them does not)."""
    answer_key, citations_key, _ = ANSWER.keys
    if data is None or answer_key not in data or citations_key not in data:
        return False
    if not isinstance(reply, str):
        return True
    start = reply.find("{")
    stack, _, _ = _scan(reply[start:].rstrip()) if start >= 0 else ([], False, [])
    return stack == ["{"] or not stack


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
        wanted = str(item.get("heading") or "").strip().lstrip("#").strip().casefold()
        heading = next((h for h in headings.get(cited.note_id, ()) if h.casefold() == wanted), "")
        found.setdefault((cited.note_id, heading), Citation(cited.title, cited.path, cited.note_id, heading))
    return tuple(found.values())


# -- the agent loop's contract with a backend's model -----------------------------------------------------------


class ToolOutput(Protocol):
    """What a driver reads of a tool result (``retriever.agent.tools.ToolResult``)."""

    @property
    def tool(self) -> str: ...
    @property
    def arguments(self) -> dict[str, Any]: ...
    @property
    def text(self) -> str: ...
    @property
    def is_error(self) -> bool: ...


@dataclass(frozen=True)
class Step:
    """What the loop offers the model this step: the notes seen (what an answer may cite, with their headings),
    the tool calls it may make (a JSON Schema ``anyOf``; None on the final step, which may only answer) and every
    tool's declaration ``(name, description, parameters)``."""

    notes: tuple[ContextNote, ...]
    headings: Mapping[str, Sequence[str]]
    calls: dict[str, Any] | None
    tools: tuple[tuple[str, str, dict[str, Any]], ...] = ()

    @property
    def final(self) -> bool:
        return self.calls is None


@dataclass(frozen=True)
class Decision:
    """What the model did in one step: tool calls ``(call id, tool, arguments)``, or a final answer."""

    calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    answer: str | Mapping[str, Any] | None = None
    finish: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    raw: str = ""


class Driver(Protocol):
    """A backend's model behind the agent loop (``llama.LlamaAgent``, ``bedrock.BedrockAgent``)."""

    model: str
    notice: str | None  # said to the person before the loop starts (the tiny packaged model is in use)

    def start(self, question: str) -> None: ...

    def inject(self, call_id: str, result: ToolOutput) -> None: ...

    def decide(self, step: Step) -> Decision: ...

    def feed(self, results: Sequence[tuple[str, ToolOutput]]) -> None: ...
