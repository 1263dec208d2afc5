"""markdown-it-py inline rules for Obsidian syntax: ``[[wikilinks]]``, ``![[embeds]]`` and ``%%comments%%``.

Written in the style of mdit-py-plugins: each rule reads ``state.src`` at ``state.pos`` and, on a match,
pushes one token whose ``meta`` carries what was parsed. Code spans are handled by markdown-it's own
``backticks`` rule, so links inside them are never seen.
"""

from __future__ import annotations

from collections.abc import Callable

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline


def _find(state: StateInline, needle: str, pos: int) -> int:
    """``state.src.find(needle, pos)``, remembered per source: the rule runs at every ``[[`` of a line, and
    searching to the end each time would make a line of n unclosed ``[[`` cost O(n^2)."""
    src = state.src
    memo: tuple[str, dict[str, tuple[int, int]]] | None = state.env.get("_obsidian_find")
    if memo is None or memo[0] is not src:
        memo = (src, {})
        state.env["_obsidian_find"] = memo
    seen = memo[1]
    searched_from, found = seen.get(needle, (len(src) + 1, -1))
    if searched_from <= pos and (found == -1 or found >= pos):
        return found  # nothing in [searched_from, found), so nothing in [pos, found) either
    found = src.find(needle, pos)
    seen[needle] = (pos, found)
    return found


def _wikilink(state: StateInline, silent: bool) -> bool:
    src, pos = state.src, state.pos
    embed = src.startswith("![[", pos)
    start = pos + (1 if embed else 0)
    if not src.startswith("[[", start):
        return False
    end = _find(state, "]]", start + 2)
    newline = _find(state, "\n", start + 2)
    if end == -1 or (newline != -1 and newline < end):
        return False  # unclosed [[ stays text
    if src.find("[[", start + 2, end) != -1:
        return False  # a later [[ opens the link (stops at the next [[, so runs of [[ stay linear)
    inner = src[start + 2 : end]
    if not inner.strip():
        return False
    if not silent:
        token = state.push("wikilink", "", 0)
        token.content = src[pos : end + 2]
        token.meta = {"inner": inner, "embed": embed, "offset": pos}
    state.pos = end + 2
    return True


def _comment(state: StateInline, silent: bool) -> bool:
    src, pos = state.src, state.pos
    if not src.startswith("%%", pos):
        return False
    end = src.find("%%", pos + 2)
    if end == -1:
        end = len(src) - 2  # an unclosed comment hides the rest, as in Obsidian
    if not silent:
        token = state.push("obsidian_comment", "", 0)
        token.content = src[pos : end + 2]
    state.pos = end + 2
    return True


def obsidian_plugin(md: MarkdownIt) -> None:
    md.inline.ruler.before("link", "wikilink", _wikilink)
    md.inline.ruler.before("wikilink", "obsidian_comment", _comment)


def make_inline_parser() -> MarkdownIt:
    """The parser used on candidate lines: code spans, escapes, links, images and Obsidian syntax."""
    md = MarkdownIt("zero").enable(["backticks", "link", "image", "escape", "autolink", "html_inline"])
    md.use(obsidian_plugin)
    return md


def make_full_parser() -> MarkdownIt:
    """A complete CommonMark + tables parser with the same rules: the reference the fast scanner is tested against."""
    md = MarkdownIt("commonmark").enable("table")
    md.use(obsidian_plugin)
    return md


def _tracked(rule: Callable[[StateInline, bool], bool]) -> Callable[[StateInline, bool], bool]:
    """Wrap markdown-it's link/image rule so the token records where the link starts and ends in ``src``."""

    def tracked(state: StateInline, silent: bool) -> bool:
        if not state.env.get("references") and _find(state, "](", state.pos) == -1:
            return False  # without reference definitions a link needs "](": skip the costly label scan
        start, first = state.pos, len(state.tokens)
        if not rule(state, silent):
            return False
        if not silent:
            for token in state.tokens[first:]:
                if token.type in ("link_open", "image"):
                    token.meta = {**(token.meta or {}), "span": (start, state.pos)}
                    break
        return True

    return tracked


def track_link_spans(md: MarkdownIt) -> None:
    for name in ("link", "image"):
        rule = next(r.fn for r in md.inline.ruler.__rules__ if r.name == name)
        md.inline.ruler.at(name, _tracked(rule))
