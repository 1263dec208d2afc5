"""Guards on a structured answer's text (the contract itself is `contract.py`).

`strip_template` cuts an answer at the first piece of the prompt's own structure; `collapse_repeats` keeps a
looping model's repeated words once; `AnswerStream` decodes the `answer` string while the JSON is still being
generated, with the same guard, so a terminal shows the answer as it comes and never the JSON around it.
"""

from __future__ import annotations

import contextlib
import re

PREFIX = (
    '{"answer": "'  # how every structured reply starts (`contract.ANSWER`'s first key): the stream decodes from here
)

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
