"""OKF fields of a note: type, title, description, timestamp, tags, aliases, session date and number. Pure."""

from __future__ import annotations

import datetime as dt
import posixpath
import re
from collections import Counter
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
    origin: TypeOrigin | None = None  # where the type came from (the report's types section)


def note_meta(
    path: str, frontmatter: dict[str, Any], body: str, mtime: float, config: Config, code: CodeLines | None = None
) -> Meta:
    """``code`` is the body's ``CodeLines`` when the caller already has it (parse_note computes one)."""
    stem = posixpath.basename(path)[:-3] or "Untitled"
    code = CodeLines(body.split("\n")) if code is None else code
    number, problems = checked_session_number(path, frontmatter)
    origin = type_origin(path, frontmatter, config)
    found = tags(frontmatter, body, code)
    return Meta(
        type=origin.type,
        title=_text(frontmatter.get("title")) or stem,
        description=clip(_text(frontmatter.get("description") or frontmatter.get("summary")))
        or description(body, code),
        timestamp=timestamp(frontmatter, mtime),
        tags=tuple(dict.fromkeys((*found, *origin.tags))),
        aliases=_strings(frontmatter.get("aliases") or frontmatter.get("alias")),
        session_date=session_date(path, frontmatter),
        session_number=number,
        problems=problems,
        origin=origin,
    )


def note_type(path: str, frontmatter: dict[str, Any], config: Config) -> str:
    return type_origin(path, frontmatter, config).type


@dataclass(frozen=True)
class TypeOrigin:
    """Where a note's type came from: ``rule`` is frontmatter, config, folder or default; ``folder`` is the
    vault folder that decided it ("" for frontmatter and default); ``tags`` are the deeper folders."""

    type: str
    rule: str
    folder: str = ""
    tags: tuple[str, ...] = ()


def type_origin(path: str, frontmatter: dict[str, Any], config: Config) -> TypeOrigin:
    """Frontmatter ``type`` wins; then the nearest folder with a configured type; then the category: the
    top-level folder (below ``config.base``, a folder holding the whole vault), numeric prefix dropped, one
    word made singular (``Guides`` -> ``Guide``; ``Maps & Documents`` stays). The folders below the category
    become tags (``World/Cipangu/Otama Domain/x.md`` -> type ``World``, tags ``cipangu``, ``otama-domain``)."""
    declared = _text(frontmatter.get("type"))
    if declared:
        return TypeOrigin(declared, "frontmatter")
    folders = posixpath.dirname(path).split("/") if "/" in path else []
    for depth in range(len(folders), 0, -1):
        if folder_key(folders[depth - 1]) in config.types:
            return TypeOrigin(config.types[folder_key(folders[depth - 1])], "config", "/".join(folders[:depth]))
    skip = len(config.base.split("/")) if config.base and path.startswith(config.base + "/") else 0
    rest = folders[skip:]
    if not rest:  # a note at the top of the vault, or directly in the base folder
        return (
            TypeOrigin(_category(strip_numeric_prefix(folders[-1])), "folder", "/".join(folders))
            if folders
            else TypeOrigin("Note", "default")
        )
    category = "/".join(folders[: skip + 1])
    tags = tuple(t for t in (folder_tag(f) for f in rest[1:]) if t)
    return TypeOrigin(_category(strip_numeric_prefix(rest[0])), "folder", category, tags)


def folder_tag(folder: str) -> str:
    """``"02 Otama Domain"`` -> ``"otama-domain"``: a folder as a tag (numeric prefix dropped, lowercase-hyphen)."""
    words = re.findall(r"[^\W_]+", strip_numeric_prefix(folder).casefold())
    return "-".join(words)


def vault_base(paths: list[str], share: float = 0.9) -> str:
    """The folder that holds (nearly) the whole vault (``01 Campaign``), so its children are the categories:
    descend while one folder holds at least ``share`` of the notes and has two or more subfolders."""
    base, notes = "", paths
    while True:
        tops = Counter(p.split("/", 1)[0] for p in notes if "/" in p)
        if not tops:
            return base
        top, count = tops.most_common(1)[0]
        inside = [p.split("/", 1)[1] for p in notes if p.startswith(top + "/")]
        if count < share * len(notes) or len({p.split("/", 1)[0] for p in inside if "/" in p}) < 2:
            return base
        base, notes = f"{base}/{top}" if base else top, inside


DESCRIPTION_CHARS = 300


def description(body: str, code: CodeLines | None = None) -> str:
    """The first real sentence of the body as plain text: not a heading, callout, code, embed, table or image;
    one longer than ``DESCRIPTION_CHARS`` ends at a word boundary with an ellipsis."""
    code = CodeLines(body.split("\n")) if code is None else code
    for i, line in enumerate(code.lines):
        if not line.strip() or _SKIP_LINE.match(line) or i in code:
            continue
        text = plain(LIST_LEAD.sub("", line)).strip()
        if len(text) >= 3 and any(c.isalpha() for c in text):
            m = _SENTENCE.match(text)
            return clip(m.group(1) if m else text)
    return ""


def clip(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    """``text`` if it fits, else cut at the last sentence end or word boundary before ``limit``, plus ``…``."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)", head)]
    if ends and ends[-1] >= limit // 2:
        return head[: ends[-1]]
    space = head.rfind(" ")
    head = head[:space] if space >= limit // 2 else head
    return head.rstrip(" ,;:-–—") + "…"


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


def _category(name: str) -> str:
    """One word is made singular (``Guides`` -> ``Guide``); a longer name is kept as written."""
    return _singular(name) if re.fullmatch(r"[^\W\d_]+", name) and not name.endswith(("us", "is")) else name


def _singular(name: str) -> str:
    if name.endswith("ies") and len(name) > 4:
        return name[:-3] + "y"
    if name.endswith("s") and not name.endswith("ss") and len(name) > 3:
        return name[:-1]
    return name
