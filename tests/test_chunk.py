import hashlib

import pytest
from growth import assert_linear

from retriever.chunk import chunk_note, clean_body
from retriever.tokens import count_tokens


def chunks_of(body, **kw):
    return chunk_note("Sessions/Session 3", "Session 3", body, **kw)


def texts(body, **kw):
    return [c.text for c in chunks_of(body, **kw)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", 0),
        ("Hello, world!", 4),
        ("Bob's 3rd_try", 4),
        ("  \n\t ", 0),
        ("café über", 2),
    ],
)
def test_count_tokens(text, expected):
    assert count_tokens(text) == expected


@pytest.mark.parametrize(
    "body, expected",
    [
        ("Met [Bob](../People/Bob%20Smith.md#anchor) today.", "Met Bob today."),
        ("See ![map](../maps/Map%20(old).png).", "See map."),
        ("A %%hidden%% B", "A  B"),
        ("A <!-- note\nto self --> B", "A  B"),
        ("Date: <% tp.date.now() %>", "Date:"),
        ("Name: `= this.file.name`", "Name:"),
        ("A line ^block-1", "A line"),
        ("```dataview\nTABLE x\n```\nkept", "kept"),
        ("```meta-bind-button\nlabel: x\n```", ""),
        ("```js\n<% tp.file.title %>\n```", ""),
        ("```python\n[a](b.md)\n```", "```python\n[a](b.md)\n```"),
    ],
)
def test_clean_body(body, expected):
    assert clean_body(body).strip() == expected


@pytest.mark.parametrize(
    "body, paths",
    [
        ("# A\none\n## B\ntwo\n# C\nthree", [("A",), ("A", "B"), ("C",)]),
        ("intro\n# A\none", [(), ("A",)]),
        ("```\n# not a heading\n```\n# A\none", [(), ("A",)]),
        ("#tag is not a heading\n# A\none", [(), ("A",)]),
        ("> # quoted\n# A\none", [(), ("A",)]),
        ("### Deep first\nx\n# Top\ny\n### Deep\nz", [("Deep first",), ("Top",), ("Top", "Deep")]),
        ("# [Bob](People/Bob.md) **bold**\nx", [("Bob bold",)]),
    ],
)
def test_heading_paths(body, paths):
    assert [c.heading_path for c in chunks_of(body, min_tokens=0)] == paths


def test_text_starts_with_title_and_heading_path():
    [chunk] = chunks_of("# Loot\n## Gold\n5 gp from the [goblin](../Goblin.md).", min_tokens=0)[1:]
    assert chunk.text == "Session 3 > Loot > Gold\n5 gp from the goblin."


def test_first_heading_equal_to_the_title_is_not_repeated():
    [chunk] = chunks_of("# Session 3\nThe party met.")
    assert chunk.heading_path == ("Session 3",)
    assert chunk.text == "Session 3\nThe party met."


def test_tiny_sections_are_merged_up_to_min_tokens():
    body = "\n".join(f"## Item {i}\nA short line about item {i}." for i in range(12))
    chunks = chunks_of(body, min_tokens=40)
    assert len(chunks) < 12
    assert all(c.tokens >= 40 for c in chunks[:-1])
    assert "## Item 1\nA short line about item 1." in chunks[0].text
    assert chunks[0].heading_path == ("Item 0",)


def test_a_tiny_last_section_joins_the_one_before():
    body = "# A\n" + "word " * 60 + "\n# B\nend"
    chunks = chunks_of(body)
    assert [c.heading_path for c in chunks] == [("A",)]
    assert chunks[0].text.endswith("# B\nend")


def test_sections_are_not_merged_past_max_tokens():
    body = "# A\n" + "word " * 30 + "\n# B\n" + "word " * 30
    assert len(chunks_of(body, min_tokens=40, max_tokens=50)) == 2


def test_long_sections_are_split_on_paragraphs():
    paragraphs = [" ".join(f"p{p}w{i}" for i in range(80)) for p in range(6)]
    chunks = chunks_of("# Long\n" + "\n\n".join(paragraphs), max_tokens=200)
    assert len(chunks) == 3
    assert all(c.heading_path == ("Long",) for c in chunks)
    assert all(c.tokens <= 200 + count_tokens("Session 3 > Long") for c in chunks)
    assert chunks[1].text.split("\n", 1)[1].startswith("p2w0")


def test_a_long_line_is_cut_at_token_boundaries():
    chunks = chunks_of("x " * 1000, max_tokens=300)
    assert [c.tokens - 2 for c in chunks] == [300, 300, 300, 100]  # "Session 3" is two tokens


def test_chunks_have_deterministic_ids_and_hashes():
    chunks = chunks_of("# A\n" + "alpha " * 50 + "\n# B\n" + "beta " * 50)
    assert [c.chunk_id for c in chunks] == ["Sessions/Session 3#0", "Sessions/Session 3#1"]
    assert chunks[0].content_hash == hashlib.sha256(f"Sessions/Session 3\n{chunks[0].text}".encode()).hexdigest()
    assert chunks_of("# A\n" + "alpha " * 50 + "\n# B\n" + "beta " * 50) == chunks


def test_the_same_text_in_another_note_has_another_hash():
    one = chunk_note("a", "T", "same text")[0]
    two = chunk_note("b", "T", "same text")[0]
    assert one.text == two.text and one.content_hash != two.content_hash


@pytest.mark.parametrize("body", ["", "   \n", "```dataview\nLIST\n```", "%% only a comment %%"])
def test_a_note_without_text_still_gets_a_title_chunk(body):
    [chunk] = chunks_of(body)
    assert (chunk.chunk_id, chunk.text, chunk.heading_path, chunk.tokens) == (
        "Sessions/Session 3#0",
        "Session 3",
        (),
        2,
    )


def test_headings_only_note_keeps_its_headings():
    [chunk] = chunks_of("# Goblins\n## Caves")
    assert "# Caves" in chunk.text and chunk.heading_path == ("Goblins",)


@pytest.mark.parametrize("unit", ["[", "![", "<!--", "<%", "[a]("])
def test_pathological_input_is_chunked_in_linear_time(unit):
    assert_linear(lambda n: chunks_of(unit * n), f"{unit!r} * n", start=256)
