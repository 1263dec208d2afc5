"""Property tests: any text parses without error, and every link found sits exactly where it says."""

from __future__ import annotations

import pytest
from growth import FACTOR, MAX_RATIO, assert_linear, growth
from hypothesis import given, settings
from hypothesis import strategies as st

from vault2okf.bundle import render_doc
from vault2okf.config import Config
from vault2okf.meta import note_meta
from vault2okf.parse import parse_note
from vault2okf.report import LinkRecord, LinkReport
from vault2okf.resolve import Resolver
from vault2okf.rewrite import rewrite_body

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
    lines = note.body.split("\n")
    for block in note.blocks:
        assert lines[block.line][block.col :].rstrip() == f"^{block.id}"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_parse_without_error(data: bytes) -> None:
    parse_note("n.md", data)


# Growth tests, not wall-clock limits: the time at n and at 4n repetitions (best of a few runs, so a busy
# machine slows both alike) must grow about linearly, by ~4. Quadratic code grows by ~16 (the code before
# issue 13 grew by 6-10 at these sizes, where its linear part still counts).
UNITS = {
    "[[": "[[", "![[a|": "![[a|", "![[": "![[", "[[x]] ": "[[x]] ", "[": "[", "[a](": "[a](", "](": "](",
    "%%": "%%", "`": "`", "#": "#", "<": "<", "[[a#": "[[a#", "| [[x\\|y]] ": "| [[x\\|y]] ", " ^a": " ^a",
    "^": "^", "[[a#^b]] ": "[[a#^b]] ",
}  # fmt: skip
LINE_UNITS = {"indented [[x]]": "    [[x]]\n", "indented after list": "      [[x]]\n", "quoted": "> [[x]]\n",
              "block ids": "x ^b\n"}  # fmt: skip


def pipeline(text: str) -> None:
    """What convert does to one note: parse, fields, resolve, rewrite, render the doc, report."""
    note = parse_note("n.md", text.encode("utf-8"))
    meta = note_meta(note.path, note.frontmatter, note.body, 0, Config(), note.code)
    resolver = Resolver(["n.md", "x.md", "a.md"], ["x.png"])
    records = [LinkRecord(note.path, link, resolver.resolve(link.target, note.path)) for link in note.links]
    body = rewrite_body(note, {r.link: r.resolution for r in records}, {"n.md": "n.md", "x.md": "x.md", "a.md": "a.md"})
    render_doc({"title": meta.title, "description": meta.description, **note.frontmatter}, body)
    LinkReport("v", (note.path,), tuple(records), (), (), {}).to_json_text()


def hostile_note(unit: str, n: int) -> str:
    line = unit * n
    # in frontmatter, as the description, and on a line with a link (so the inline parser reads it)
    return f"---\ntags: [{line[:5000]}\n---\n{line}\n\n[[x]] {line} [[x]]\n"


@pytest.mark.parametrize("unit", list(UNITS.values()), ids=list(UNITS))
def test_time_grows_linearly_with_a_run_on_one_line(unit: str) -> None:
    assert_linear(lambda k: pipeline(hostile_note(unit, k)), repr(unit))


@pytest.mark.parametrize("unit", list(LINE_UNITS.values()), ids=list(LINE_UNITS))
def test_time_grows_linearly_with_the_number_of_lines(unit: str) -> None:
    assert_linear(lambda k: pipeline("para\n\n" + unit * k), repr(unit))


def test_the_growth_check_fails_quadratic_work() -> None:
    """The check itself: deliberately quadratic work fails it, so a pass above means something."""

    def quadratic(k: int) -> int:
        text = "a" * k
        return sum(len(text[i:]) for i in range(k))  # each slice copies: O(k^2)

    n, t1, t2 = growth(quadratic)
    assert t2 / t1 > MAX_RATIO, f"{n}: {t1:.3f}s, {FACTOR * n}: {t2:.3f}s"
