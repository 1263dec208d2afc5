"""A reference link extractor: a full markdown-it-py parse (CommonMark + tables) with the same Obsidian rules.

The fast scanner in ``vault2okf.scan`` is checked against it; it is too slow to use in the converter.
"""

from __future__ import annotations

from vault2okf.mdit_obsidian import make_full_parser, track_link_spans

_MD = make_full_parser()
track_link_spans(_MD)


def full_spans(body: str) -> set[tuple[int, str, str]]:
    """(0-based line, kind, wikilink inner or link destination) for every link outside code and comments."""
    found: set[tuple[int, str, str]] = set()
    last_map = (0, 0)
    for token in _MD.parse(body):
        if token.map:
            last_map = token.map
        if token.type != "inline":
            continue
        for child in token.children or ():
            meta = child.meta or {}
            if child.type == "wikilink":
                kind, inner, offset = "wikilink", meta["inner"], meta["offset"]
            elif child.type in ("link_open", "image") and "span" in meta:
                attr = "href" if child.type == "link_open" else "src"
                kind, inner, offset = (
                    ("link" if child.type == "link_open" else "image"),
                    str(child.attrs[attr]),
                    meta["span"][0],
                )
            else:
                continue
            found.add((last_map[0] + token.content.count("\n", 0, offset), kind, inner))
    return found
