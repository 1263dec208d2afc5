"""Search filters: which notes a search may return, by type, tag, folder and date (``NoteFilter``).

The semantics, the same for the CLI (``--type --tag --folder --since --until``), the tools and the HTTP API:

- several values of one key match a note that has any of them (OR); different keys must all match (AND);
- ``type`` compares with the note's type case-insensitively (``session`` matches ``Session``);
- ``tag`` matches a tag of the note or a tag nested under it, case-insensitively, the leading ``#`` optional
  (``#project`` and ``project`` match ``project`` and ``project/alpha``, not ``projects``);
- ``folder`` matches the start of the note's vault path by whole folders, case as written (``Sessions`` matches
  ``Sessions/x.md`` and ``Sessions/2024/x.md``, not ``Sessions-old/x.md``; slashes around it are optional);
- ``since`` and ``until`` are inclusive dates compared with the note's date (``note_date``); a note without one
  never passes them.

An empty filter lets every note through: the search is then exactly the unfiltered one.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

from retriever.errors import RetrieverError

KEYS = ("type", "tag", "folder", "since", "until")  # a filter's keys in JSON, each the singular of its field
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
# the frontmatter keys `vault2okf/meta.py` takes a note's timestamp from, in its order
_DATE_KEYS = ("date", "created", "updated", "modified", "timestamp", "sessiondate", "session_date")


class Filtered(Protocol):
    """What a filter reads of a note (``retriever.graph.Concept`` has it)."""

    @property
    def type(self) -> str: ...
    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def vault_path(self) -> str: ...
    @property
    def date(self) -> str | None: ...


@dataclass(frozen=True)
class NoteFilter:
    """Which notes a search may return (the module's docstring has the rules). Values are tidied on the way in
    (a tag's ``#``, a folder's slashes, blanks and repeats dropped), so equal filters compare and hash equal."""

    types: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    since: dt.date | None = None
    until: dt.date | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", _tidy(self.types, "type", lambda v: v.strip()))
        object.__setattr__(self, "tags", _tidy(self.tags, "tag", lambda v: v.strip().lstrip("#").strip()))
        object.__setattr__(self, "folders", _tidy(self.folders, "folder", _folder))
        for name in ("since", "until"):
            object.__setattr__(self, name, _date(getattr(self, name), name))
        if self.since and self.until and self.since > self.until:
            raise RetrieverError(
                f"since {self.since} is after until {self.until}: no note could pass; swap them or widen the range"
            )

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> NoteFilter:
        """A filter from JSON: ``{"type": ..., "tag": ..., "folder": ..., "since": ..., "until": ...}``, each key
        optional (null is absent); ``type``, ``tag`` and ``folder`` take a string or a list of strings, ``since``
        and ``until`` a date as YYYY-MM-DD. Anything else is a ``RetrieverError`` that says what is wrong."""
        if obj is None:
            return cls()
        if not isinstance(obj, Mapping):
            raise RetrieverError(f"a filter is an object with the keys {', '.join(KEYS)}, not {_shown(obj)}")
        unknown = sorted(str(key) for key in obj if key not in KEYS)
        if unknown:
            raise RetrieverError(f"unknown filter key(s) {', '.join(map(repr, unknown))}: use {', '.join(KEYS)}")
        lists = {f"{key}s": _strings(obj.get(key), key) for key in ("type", "tag", "folder")}
        return cls(**lists, since=_date(obj.get("since"), "since"), until=_date(obj.get("until"), "until"))

    def to_json(self) -> dict[str, Any]:
        """The keys this filter sets, as ``from_json`` reads them (``{}`` for the empty filter)."""
        out: dict[str, Any] = {}
        for key, value in zip(KEYS, (getattr(self, f.name) for f in fields(self)), strict=True):
            if value:
                out[key] = list(value) if isinstance(value, tuple) else value.isoformat()
        return out

    @property
    def empty(self) -> bool:
        """Whether the filter lets every note through."""
        return not (self.types or self.tags or self.folders or self.since or self.until)

    def allows(self, concept: Filtered | None) -> bool:
        """Whether a note passes; an unknown note (None) passes only the empty filter."""
        if self.empty:
            return True
        if concept is None:
            return False
        return (
            self._type_ok(concept.type)
            and self._tags_ok(concept.tags)
            and self._folder_ok(concept.vault_path)
            and self._date_ok(concept.date)
        )

    def _type_ok(self, note_type: str) -> bool:
        return not self.types or note_type.casefold() in {t.casefold() for t in self.types}

    def _tags_ok(self, note_tags: Sequence[str]) -> bool:
        if not self.tags:
            return True
        have = [t.casefold().lstrip("#") for t in note_tags]
        return any(t == want or t.startswith(want + "/") for want in (w.casefold() for w in self.tags) for t in have)

    def _folder_ok(self, vault_path: str) -> bool:
        return not self.folders or any(vault_path.startswith(folder + "/") for folder in self.folders)

    def _date_ok(self, date: str | None) -> bool:
        if self.since is None and self.until is None:
            return True
        if date is None:
            return False
        return (self.since is None or date >= self.since.isoformat()) and (
            self.until is None or date <= self.until.isoformat()
        )


def note_date(timestamp: str | None, session_date: str | None, frontmatter: str | None) -> str | None:
    """A note's date (YYYY-MM-DD) from its ``concepts`` row, what ``since``/``until`` compare: the frontmatter's
    date (the first of ``date``, ``created``, ``updated``, ``modified``, ``timestamp``, ``sessiondate``,
    ``session_date`` that reads as an ISO date: what ``timestamp`` then holds), else the session date (from the
    frontmatter or the file name), else the file's modification time (what ``timestamp`` holds otherwise, in
    UTC). The date is the one written, before any time zone is applied. None when there is none."""
    stamp = _day(timestamp)
    if stamp is not None and _frontmatter_dated(frontmatter):
        return stamp
    return session_date if session_date and _day(session_date) else stamp


def _frontmatter_dated(frontmatter: str | None) -> bool:
    """Whether ``meta.timestamp`` took the note's timestamp from its frontmatter (JSON text; a date object was
    written as its ``str``) rather than from the file's modification time."""
    if not frontmatter or not any(key in frontmatter for key in _DATE_KEYS):
        return False
    try:
        data = json.loads(frontmatter)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    return any(isinstance(data.get(key), str) and _day(data[key]) is not None for key in _DATE_KEYS)


def _day(text: str | None) -> str | None:
    """The date of an ISO date or date-time, as written; None when ``text`` is none."""
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.strip()).date().isoformat()
    except ValueError:
        return None


def _tidy(values: Any, key: str, clean: Any) -> tuple[str, ...]:
    cleaned = [clean(v) for v in _strings(values, key)]
    if not all(cleaned):
        raise RetrieverError(f"filter {key}: an empty value; give a {key}, or leave the key out")
    return tuple(dict.fromkeys(cleaned))


def _strings(value: Any, key: str) -> tuple[str, ...]:
    """A string or a list of strings (None: none)."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(v, str) for v in items):
        raise RetrieverError(f"filter {key}: a string or a list of strings, not {_shown(value)}")
    return tuple(items)


def _folder(value: str) -> str:
    folder = value.strip().strip("/")
    while folder.startswith("./"):
        folder = folder[2:].lstrip("/")
    return "" if folder == "." else folder


def _date(value: Any, key: str) -> dt.date | None:
    if value is None or (isinstance(value, dt.date) and not isinstance(value, dt.datetime)):
        return value
    if isinstance(value, str) and _ISO_DATE.fullmatch(value.strip()):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise RetrieverError(f"filter {key}: {_shown(value)} is not a date; write it as YYYY-MM-DD (2024-03-31)")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
