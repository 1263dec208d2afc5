"""The one "not found" rule, shared by ``ask --json`` and the harness's answer scoring.

An answer is "not found" when it cites no note and either sets the structured ``not_found`` flag or says so
in its text in any of the usual ways ("not found in the vault", "I couldn't find …", "the notes don't
mention …"): an answer that cites a note is making a claim. Unless the text is the refusal itself ("Not
found in the vault."): that claims nothing, its citations are dropped and it is "not found".
`not_found` is that rule; the backends apply it
when they parse an answer (``Answer.not_found``), and ``ask --json`` and the scorer read that field.
`is_not_found` is the same rule for a plain-text answer whose citations are markdown links.
"""

from __future__ import annotations

import re
import unicodedata

NOT_FOUND = "not found in the vault"

CITATION_LINK = re.compile(r"\[([^\[\]\n]*)\]\((?:<([^<>\n]+)>|([^()<>\[\]\s]+))\)")  # [label](path) or (<path>)
_MARKUP = str.maketrans({"*": "", "_": "", "`": "", '"': "", "\u201c": "", "\u201d": ""})
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_SOURCE = r"(?:the|my|your|any|these|this) (?:vault|notes?|context|sources?|documents?)"
_DECLINES = re.compile(
    r"^not found\b"
    rf"|\bnot (?:be )?(?:found|mentioned|covered|recorded|stated) in {_SOURCE}"
    r"|\b(?:i|we) (?:could ?not|couldn't|can ?not|can't|was unable to|am unable to|did not|didn't)"
    r" (?:find|locate)\b"
    r"|\b(?:vault|notes?|context) (?:does not|doesn't|do not|don't) (?:say|mention|contain|cover|record)\b"
    r"|\bno (?:information|mention|notes?) (?:about|of|on|for|regarding)\b"
    r"|\bi (?:do not|don't) know\b"
)


def fold(text: str) -> str:
    """Casefolded, accents stripped, curly apostrophes straightened, whitespace collapsed (the scorer's too)."""
    decomposed = unicodedata.normalize("NFKD", text.translate(_APOSTROPHES))
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(bare.casefold().split())


def declines(text: str) -> bool:
    """The text says the notes do not hold the answer (emphasis, quotes, case and accents ignored)."""
    return _DECLINES.search(fold(text.translate(_MARKUP))) is not None


def refusal_only(text: str) -> bool:
    """The text is the refusal itself ("Not found in the vault."): it claims nothing, so a citation beside it
    supports nothing and the answer is a refusal whatever its flag says."""
    return fold(text.translate(_MARKUP)).startswith(NOT_FOUND)


def not_found(text: str, *, flag: bool = False, cited: bool = False) -> bool:
    """The rule: the text is the refusal itself; or nothing is cited, and the flag is set or the text declines."""
    return refusal_only(text) or (not cited and (flag or declines(text)))


def is_not_found(text: str) -> bool:
    """The rule for plain text: a markdown link counts as a citation, and there is no flag."""
    return not_found(text, cited=CITATION_LINK.search(text) is not None)
