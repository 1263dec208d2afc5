"""OKF fields of a note: type, title, description, timestamp, tags, aliases, session date and number. Pure."""

from __future__ import annotations

import datetime as dt
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from vault2okf.config import Config, folder_key
from vault2okf.parse import LIST_LEAD
from vault2okf.scan import CodeLines

_INLINE_TAG = re.compile(r"(?<![\w#/&\[\]`(])#([A-Za-z_][\w/-]*)")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_SESSION_NO = re.compile(r"\bsession[\s_-]*(\d{1,4})\b", re.IGNORECASE)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_WIKILINK = re.compile(r"!?\[\[([^\]|#]*)(?:#[^\]|]*)?(?:\|([^\]]*))?\]\]")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKUP = re.compile(r"[*_~=`]+|<[^>]+>")
_COMMENT = re.compile(r"%%.*?(?:%%|$)")
_SENTENCE = re.compile(r"^(.+?[.!?])(?=\s|$)")
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


def note_meta(
    path: str, frontmatter: dict[str, Any], body: str, mtime: float, config: Config, code: CodeLines | None = None
) -> Meta:
    """``code`` is the body's ``CodeLines`` when the caller already has it (parse_note computes one)."""
    stem = posixpath.basename(path)[:-3] or "Untitled"
    code = CodeLines(body.split("\n")) if code is None else code
    return Meta(
        type=note_type(path, frontmatter, config),
        title=_text(frontmatter.get("title")) or stem,
        description=_text(frontmatter.get("description") or frontmatter.get("summary")) or description(body, code),
        timestamp=timestamp(frontmatter, mtime),
        tags=tags(frontmatter, body, code),
        aliases=_strings(frontmatter.get("aliases") or frontmatter.get("alias")),
        session_date=session_date(path, frontmatter),
        session_number=session_number(path, frontmatter),
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
    return _singular(_strip_prefix(folders[-1])) if folders else "Note"


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
    return dt.datetime.fromtimestamp(int(mtime), tz=dt.UTC).isoformat()


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
            yield from _INLINE_TAG.findall(_CODE_SPAN.sub("", line))


def session_number(path: str, frontmatter: dict[str, Any]) -> int | None:
    for key in ("session", "session_number", "sessionnumber"):
        value = frontmatter.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
    m = _SESSION_NO.search(posixpath.basename(path))
    return int(m.group(1)) if m else None


def session_date(path: str, frontmatter: dict[str, Any]) -> str | None:
    for key in ("sessiondate", "session_date", "date"):
        value = frontmatter.get(key)
        if isinstance(value, dt.date):
            return (value.date() if isinstance(value, dt.datetime) else value).isoformat()
        if isinstance(value, str) and (m := _ISO_DATE.search(value)):
            return m.group(0)
    m = _ISO_DATE.search(posixpath.basename(path))
    return m.group(0) if m else None


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list | tuple) else [value]
    return tuple(str(v).strip() for v in items if v is not None and str(v).strip())


def _text(value: Any) -> str:
    return " ".join(str(value).split()) if isinstance(value, str | int | float) and str(value).strip() else ""


def _strip_prefix(folder: str) -> str:
    head, sep, rest = folder.partition(" ")
    return rest if sep and rest and head.rstrip(".-_").replace(".", "").isdigit() else folder


def _singular(name: str) -> str:
    if name.endswith("ies") and len(name) > 4:
        return name[:-3] + "y"
    if name.endswith("s") and not name.endswith("ss") and len(name) > 3:
        return name[:-1]
    return name
