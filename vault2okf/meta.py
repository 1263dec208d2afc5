"""OKF fields of a note: type, title, description, timestamp, tags, aliases, session date and number. Pure."""

from __future__ import annotations

import datetime as dt
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from vault2okf.config import Config, folder_key, strip_numeric_prefix
from vault2okf.parse import LIST_LEAD, Problem
from vault2okf.scan import CodeLines

# Every pattern below is linear on any line: no repeated part can match what starts the next attempt
# (``[`` ends a link label, ``(`` a destination, ``<`` a tag), so one bad line never costs O(n^2).
_INLINE_TAG = re.compile(r"(?<![\w#/&\[\]`(])#([A-Za-z_][\w/-]*)")
_TICKS = re.compile(r"`+")
_SESSION_NO = re.compile(r"\bsession[\s_-]*(\d{1,4})\b", re.IGNORECASE)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_WIKILINK = re.compile(r"!?\[\[([^\[\]|#]*)(?:#[^\[\]|]*)?(?:\|([^\[\]]*))?\]\]")
_MD_LINK = re.compile(r"!?\[([^\[\]]*)\]\([^()]*\)")
_MARKUP = re.compile(r"[*_~=`]+|<[^<>]+>")
_COMMENT = re.compile(r"%%.*?(?:%%|$)")
_SENTENCE = re.compile(r"^(.+?[.!?])(?=\s|$)")
INT_RANGE = (-(2**31), 2**31 - 1)  # okf.duckdb's session_number is an INTEGER
_DATE_KEYS = ("date", "created", "updated", "modified", "timestamp", "sessiondate", "session_date")
_SKIP_LINE = re.compile(  # headings, quotes/callouts, tables, images, code, HTML, rules, comments, plugin markup,
    r"^\s*(?:#|>|\||!\[|```|~~~|<|-{3,}|\*{3,}|_{3,}|%%|\$\{|`INPUT|`VIEW|\[!"
    r"|(?:[-*+]\s*)?\*\*[^*]{1,40}:\*\*|[\w ]{1,30}::)"  # and "**Key:** value" / "key:: value" property lines
)


@dataclass(frozen=True)
class Meta:
    type: str
    title: str
    description: str
    timestamp: str
    tags: tuple[str, ...]
    aliases: tuple[str, ...]
    session_date: str | None
    session_number: int | None
    problems: tuple[Problem, ...] = ()  # values that were dropped (a session number out of range, ...)


def note_meta(
    path: str, frontmatter: dict[str, Any], body: str, mtime: float, config: Config, code: CodeLines | None = None
) -> Meta:
    """``code`` is the body's ``CodeLines`` when the caller already has it (parse_note computes one)."""
    stem = posixpath.basename(path)[:-3] or "Untitled"
    code = CodeLines(body.split("\n")) if code is None else code
    number, problems = checked_session_number(path, frontmatter)
    return Meta(
        type=note_type(path, frontmatter, config),
        title=_text(frontmatter.get("title")) or stem,
        description=_text(frontmatter.get("description") or frontmatter.get("summary")) or description(body, code),
        timestamp=timestamp(frontmatter, mtime),
        tags=tags(frontmatter, body, code),
        aliases=_strings(frontmatter.get("aliases") or frontmatter.get("alias")),
        session_date=session_date(path, frontmatter),
        session_number=number,
        problems=problems,
    )


def note_type(path: str, frontmatter: dict[str, Any], config: Config) -> str:
    """Frontmatter ``type`` wins; then the nearest folder with a configured type; then the nearest folder."""
    declared = _text(frontmatter.get("type"))
    if declared:
        return declared
    folders = posixpath.dirname(path).split("/") if "/" in path else []
    for folder in reversed(folders):
        if folder_key(folder) in config.types:
            return config.types[folder_key(folder)]
    return _singular(strip_numeric_prefix(folders[-1])) if folders else "Note"


def description(body: str, code: CodeLines | None = None) -> str:
    """The first real sentence of the body as plain text: not a heading, callout, code, embed, table or image."""
    code = CodeLines(body.split("\n")) if code is None else code
    for i, line in enumerate(code.lines):
        if not line.strip() or _SKIP_LINE.match(line) or i in code:
            continue
        text = plain(LIST_LEAD.sub("", line)).strip()
        if len(text) >= 3 and any(c.isalpha() for c in text):
            m = _SENTENCE.match(text)
            return (m.group(1) if m else text)[:300]
    return ""


def plain(text: str) -> str:
    """Markdown and wiki links reduced to their labels; comments, emphasis and HTML tags dropped."""
    text = _COMMENT.sub("", text)
    text = _WIKILINK.sub(lambda m: (m.group(2) or m.group(1)).strip(), text)
    text = _MD_LINK.sub(lambda m: m.group(1), text)
    return " ".join(_MARKUP.sub("", text).split())


def timestamp(frontmatter: dict[str, Any], mtime: float) -> str:
    """A frontmatter date (date objects or ISO strings; naive times read as UTC), else the file's mtime."""
    for key in _DATE_KEYS:
        value = _as_datetime(frontmatter.get(key))
        if value is not None:
            return value.isoformat()
    try:
        return dt.datetime.fromtimestamp(int(mtime), tz=dt.UTC).isoformat()
    except (ValueError, OverflowError, OSError):  # the walk clamps and reports; this keeps the function total
        return (dt.datetime.max if mtime > 0 else dt.datetime.min).replace(tzinfo=dt.UTC).isoformat()


def _as_datetime(value: Any) -> dt.datetime | None:
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
    return None


def tags(frontmatter: dict[str, Any], body: str, code: CodeLines | None = None) -> tuple[str, ...]:
    raw = frontmatter.get("tags") or frontmatter.get("tag")
    found = list(_strings(raw.split(",") if isinstance(raw, str) else raw))
    found += list(_inline_tags(body, code))
    cleaned = (t.strip().lstrip("#").strip() for t in found)
    return tuple(dict.fromkeys(t for t in cleaned if t))


def _inline_tags(body: str, code: CodeLines | None) -> Iterator[str]:
    if "#" not in body:
        return
    code = CodeLines(body.split("\n")) if code is None else code
    for i, line in enumerate(code.lines):
        if "#" in line.lstrip("#") and _INLINE_TAG.search(line) and i not in code:
            yield from _INLINE_TAG.findall(strip_code_spans(line))


def strip_code_spans(line: str) -> str:
    """``line`` without its code spans: a run of backticks opens a span that the next run of the same length
    closes (CommonMark). One pass over the runs, so a line of n backticks costs O(n)."""
    if "`" not in line:
        return line
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(line)]
    closer: list[int | None] = [None] * len(runs)
    later: dict[int, int] = {}  # run length -> index of the nearest later run of that length
    for k in range(len(runs) - 1, -1, -1):
        length = runs[k][1] - runs[k][0]
        closer[k] = later.get(length)
        later[length] = k
    out, pos, k = [], 0, 0
    while k < len(runs):
        close = closer[k]
        if close is None:
            k += 1
            continue
        out.append(line[pos : runs[k][0]])
        pos, k = runs[close][1], close + 1
    out.append(line[pos:])
    return "".join(out)


def session_number(path: str, frontmatter: dict[str, Any]) -> int | None:
    return checked_session_number(path, frontmatter)[0]


def checked_session_number(path: str, frontmatter: dict[str, Any]) -> tuple[int | None, tuple[Problem, ...]]:
    """The session number from frontmatter or the file name; one outside INTEGER range is dropped, reported."""
    for key in ("session", "session_number", "sessionnumber"):
        value = frontmatter.get(key)
        number = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 20:
            number = int(value)
        if number is None:
            continue
        if INT_RANGE[0] <= number <= INT_RANGE[1]:
            return number, ()
        message = f"`{key}: {number}` is out of range for a session number ({INT_RANGE[1]:,} at most); dropped"
        return None, (Problem("value", message, None),)
    m = _SESSION_NO.search(posixpath.basename(path))
    return (int(m.group(1)) if m else None), ()


def session_date(path: str, frontmatter: dict[str, Any]) -> str | None:
    for key in ("sessiondate", "session_date", "date"):
        value = frontmatter.get(key)
        if isinstance(value, dt.date):
            return (value.date() if isinstance(value, dt.datetime) else value).isoformat()
        if isinstance(value, str) and (m := _ISO_DATE.search(value)) and _real_date(m.group(0)):
            return m.group(0)
    m = _ISO_DATE.search(posixpath.basename(path))
    return m.group(0) if m and _real_date(m.group(0)) else None


def _real_date(text: str) -> bool:
    """``2024-02-29`` yes, ``2024-02-30`` no."""
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list | tuple) else [value]
    return tuple(str(v).strip() for v in items if v is not None and str(v).strip())


def _text(value: Any) -> str:
    return " ".join(str(value).split()) if isinstance(value, str | int | float) and str(value).strip() else ""


def _singular(name: str) -> str:
    if name.endswith("ies") and len(name) > 4:
        return name[:-3] + "y"
    if name.endswith("s") and not name.endswith("ss") and len(name) > 3:
        return name[:-1]
    return name
