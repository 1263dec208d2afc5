"""Property tests: any text parses without error, and every link found sits exactly where it says."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from vault2okf.parse import parse_note
from vault2okf.scan import find_spans

PIECES = st.sampled_from(
    ["[[", "]]", "|", "\\|", "#", "^", "![[", "](", "[", "]", "(", ")", "`", "```", "~~~", "%%", "\n", "\n\n",
     "    ", "\t", "- ", "> ", "---\n", "a", "Note", " ", "é", "e\u0301", ".md", "/", "x.png"]
)  # fmt: skip
TEXT = st.lists(PIECES, max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_any_text_parses_and_links_point_at_themselves(text: str) -> None:
    note = parse_note("n.md", text.encode("utf-8"))
    for link in note.links:
        if link.syntax != "frontmatter":
            line = note.body.split("\n")[link.line - note.body_line]
            assert line[link.col : link.col + len(link.raw)] == link.raw


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_parse_without_error(data: bytes) -> None:
    parse_note("n.md", data)


def test_no_catastrophic_backtracking_on_hostile_lines() -> None:
    """ReDoS check: long runs of the characters the link rules look at stay linear."""
    for hostile in ("[[" * 20000, "[" * 40000 + "](", "%%" * 20000, "`" * 40000, "![[a|" * 10000, "#" * 40000):
        start = time.perf_counter()
        list(find_spans([hostile]))
        parse_note("n.md", ("---\ntags: [" + hostile[:5000] + "\n---\n" + hostile).encode())
        assert time.perf_counter() - start < 5, hostile[:10]
