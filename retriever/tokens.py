"""The one token count used for every budget, so budgets of different methods are comparable."""

import re

_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Number of word pieces in `text`: runs of word characters, and every other non-space character."""
    return sum(1 for _ in _TOKEN.finditer(text))


def token_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each token, for cutting text at a token boundary."""
    return [m.span() for m in _TOKEN.finditer(text)]
