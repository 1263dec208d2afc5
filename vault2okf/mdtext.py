"""Text from a vault (note names, link targets, titles, messages quoting them) written into markdown: shown as
written, never read as HTML or markup. A note named ``<script>…</script>`` stays text when the report is
rendered with HTML allowed (Obsidian, a static site, an editor's preview)."""

from __future__ import annotations

import re
from functools import lru_cache

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0 (newline and tab too: one line), DEL, C1
# what markdown or HTML would read, each escaped with \ (CommonMark): always, and ``_`` unless inside a word
# (``snake_case`` is never emphasis), ``~`` unless between spaces (``a ~ b`` strikes nothing through), ``&`` only
# where it starts an entity (``&lt;``)
_SPECIAL = re.compile(r"[\\`*\[\]<|]|(?<![^\W_])_|_(?![^\W_])|(?<!\s)~|~(?!\s)|&(?=#?\w+;)")
_TICKS = re.compile(r"`+")


def one_line(value: object) -> str:
    """``value`` as one line: every control character (C0, DEL, C1) a space."""
    return _CONTROL.sub(" ", str(value))


def text(value: object) -> str:
    """``value`` as inline markdown text (a list item, a bold span, a table cell): one line, every character
    markdown or HTML would read backslash-escaped (``<`` and an entity's ``&`` included: no tag, no entity)."""
    return _text(value) if isinstance(value, str) else _text(str(value))


@lru_cache(maxsize=1 << 16)
def _text(value: str) -> str:
    """``text`` of a string, remembered (a bounded memo: reports and folder indexes name the same notes again)."""
    return _SPECIAL.sub(lambda m: "\\" + m.group(), one_line(value))


def code(value: object) -> str:
    """``value`` as an inline code span (shown literally, HTML included): fenced by one backtick more than its
    longest run of them, padded when it starts or ends with a backtick or a space, so it cannot end the span."""
    s = one_line(value)
    fence = "`" * (max((len(run) for run in _TICKS.findall(s)), default=0) + 1)
    pad = " " if s[:1] in ("`", " ") or s[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{s}{pad}{fence}"
