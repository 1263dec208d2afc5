"""Link finding: a case table for the fast scanner, and agreement with a full markdown-it-py parse on real vaults."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import full_spans

from vault2okf.parse import decode, split_frontmatter
from vault2okf.scan import CodeLines, code_mask, find_spans

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"


def inners(text: str) -> list[str]:
    return [s.inner for s in find_spans(text.split("\n"))]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see [[Note]] and [[Other|label]]", ["Note", "Other|label"]),
        ("`[[in code]]` but [[out]]", ["out"]),
        ("``a `[[x]]` b`` [[y]]", ["y"]),
        ("```\n[[fenced]]\n```\n[[after]]", ["after"]),
        ("~~~~md\n[[fenced]]\n~~~\n[[still fenced]]\n~~~~\n[[after]]", ["after"]),
        ("para\n\n    [[indented code]]\n\n[[after]]", ["after"]),
        ("- item\n\n    [[list continuation]]", ["list continuation"]),
        ("- item\n\t- [[nested item]]", ["nested item"]),
        ("text %%[[hidden]]%% [[shown]]", ["shown"]),
        ("%%\n[[hidden]]\n%%\n[[shown]]", ["shown"]),
        ("an unclosed [[ bracket and [[ok]]", ["ok"]),
        ("[[never closed", []),
        ("| a | [[Note\\|label]] |", ["Note\\|label"]),
        ("![[image.png|100x145]]", ["image.png|100x145"]),
        ("[x](Note%20Name.md) ![i](pic.png)", ["Note%20Name.md", "pic.png"]),
        ("> ```\n> [[quoted code]]\n\n[[after quote]]", ["after quote"]),
        ("[[]] and [[ ]]", []),
    ],
)
def test_find_spans(text: str, expected: list[str]) -> None:
    assert inners(text) == expected


def test_code_mask_marks_fences_and_comments() -> None:
    lines = ["a", "```", "b", "```", "%%", "c", "%% [[x]]", "d"]
    assert code_mask(lines) == [False, True, True, True, False, True, False, False]
    assert [s.inner for s in find_spans(lines)] == ["x"]


def test_wikilink_offsets_point_at_the_raw_link() -> None:
    line = "x `[[no]]` [[Yes|y]] ![[Img.png]]"
    spans = list(find_spans([line]))
    assert [line[s.start : s.end] for s in spans] == ["[[Yes|y]]", "![[Img.png]]"]
    assert [s.embed for s in spans] == [False, True]


@pytest.mark.parametrize("vault", ["blades-of-vengeance", "children-of-ash", "thellade"])
def test_fast_scanner_agrees_with_full_parse(vault: str) -> None:
    """Every link the full CommonMark parse finds, and no other, on every note of a real vault."""
    root = VAULTS / vault
    if not root.is_dir():
        pytest.skip(f"{root} not present")
    differing = []
    for path in sorted(root.rglob("*.md")):
        _, body, _ = split_frontmatter(decode(path.read_bytes())[0])
        fast = {(s.line, s.kind, s.inner) for s in find_spans(body.split("\n"))}
        if fast != full_spans(body):
            differing.append(str(path.relative_to(root)))
    assert differing == []


def _indented_code_reference(lines: list[str], i: int) -> bool:
    """The indented-code rule as first written: walk back from each line (quadratic, but plainly right)."""
    from vault2okf.scan import _BLOCK_END, _INDENTED, _LIST_ITEM, _content_column, _indent, _paragraph_in_list

    line = lines[i]
    if not line.strip() or not _INDENTED.match(line):
        return False
    saw_blank = False
    for j in range(i - 1, -1, -1):
        prev = lines[j]
        if not prev.strip():
            saw_blank = True
        elif _LIST_ITEM.match(prev):
            return saw_blank and _indent(line) >= _content_column(prev) + 4
        elif not _INDENTED.match(prev):
            return not _paragraph_in_list(lines, j) if saw_blank else bool(_BLOCK_END.match(prev))
    return True


LINES = st.lists(
    st.sampled_from(["", "  ", "para", "# h", "- item", "  - nested", "1. one", "    code", "\tcode", "      deep",
                     "    - indented item", "        more", "---", "> quote"]),
    max_size=30,
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(LINES, st.randoms(use_true_random=False))
def test_remembered_indented_code_agrees_with_the_plain_walk(lines: list[str], rnd: random.Random) -> None:
    code = CodeLines(lines)
    order = list(range(len(lines)))
    rnd.shuffle(order)
    for i in order:
        assert code._indented_code(i) == _indented_code_reference(lines, i), (lines, i)
