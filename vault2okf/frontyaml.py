"""A doc's frontmatter as YAML: the text ``yaml.dump`` (libyaml's emitter) writes, without its Python
representer for the shapes most docs have.

PyYAML builds a node for every value in Python and asks its resolver about every scalar before libyaml
writes a byte; that was about a sixth of rendering a doc. ``dump`` writes the common shapes itself: a mapping
of short one-line strings, ints, booleans, nulls, dates, lists of those, and mappings of those one level down. It
follows the emitter's rules for them (a string is written plain where the emitter would, else in single
quotes) and hands anything else, or anything it is not sure of, to ``yaml.dump`` whole. The two agree byte
for byte (tests/test_frontyaml.py, and every doc of the shared vaults).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import yaml

_STR = "tag:yaml.org,2002:str"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_RESOLVER = yaml.resolver.Resolver()  # the one CSafeDumper uses
# printable for libyaml's emitter and no line break: not tab, NEL, U+2028/2029, the BOM, controls, and nothing
# beyond U+FFFD (libyaml escapes emoji and every other character outside the Basic Multilingual Plane)
_ONE_LINE = re.compile("[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]+")
_FIRST = frozenset("#,[]{}&*!|>'\"%@`")
LONGEST = 1000  # longer strings may be folded at the emitter's width: yaml.dump writes them
LONGEST_KEY = 100  # the emitter writes a key over 128 characters as a complex key ("? ")


class _Unsure(Exception):
    """A value this module does not write: ``yaml.dump`` writes the whole mapping."""


def dump(mapping: Mapping[str, Any]) -> str:
    """``yaml.dump(dict(mapping), Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True, width=4096)``."""
    try:
        if not mapping:
            raise _Unsure
        return "".join(_entry(key, value, "") for key, value in mapping.items())
    except _Unsure:
        return yaml.dump(dict(mapping), Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True, width=4096)


def _entry(key: Any, value: Any, indent: str) -> str:
    if not isinstance(key, str) or len(key) > LONGEST_KEY:
        raise _Unsure
    head = f"{indent}{_scalar(key)}:"
    if type(value) is list:  # exact types, as for scalars: the safe representer refuses subclasses
        if not value:
            return f"{head} []\n"
        return head + "\n" + "".join(f"{indent}- {_scalar(item)}\n" for item in value)
    if type(value) is dict:
        if indent or not value:  # deeper, or an empty one ({}): left to yaml.dump
            raise _Unsure
        return head + "\n" + "".join(_entry(k, v, "  ") for k, v in value.items())
    return f"{head} {_scalar(value)}\n"


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    if type(value) is dt.date:  # the representer's isoformat, plain while it reads back as a date
        text = value.isoformat()
        if _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) != _TIMESTAMP:
            raise _Unsure
        return text
    if type(value) is not str:  # floats, datetimes, subclasses: the representer knows their forms
        raise _Unsure
    return _string(value)


@lru_cache(maxsize=1 << 16)  # titles, types and tags repeat across a vault's docs
def _string(text: str) -> str:
    if not text:
        return "''"
    if len(text) > LONGEST or not _ONE_LINE.fullmatch(text):
        raise _Unsure
    if _plain(text):
        return text
    return "'" + text.replace("'", "''") + "'"


def _plain(text: str) -> bool:
    """Would the emitter write ``text`` plain in block context (as a value, a list item or a key)?"""
    if text[0] == " " or text[-1] == " " or text.startswith(("---", "...")):
        return False
    first = text[0]
    if first in _FIRST or (first in "?:-" and (len(text) == 1 or text[1] == " ")):
        return False
    if ": " in text or text.endswith(":") or " #" in text:
        return False
    return _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) == _STR
