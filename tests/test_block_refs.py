"""Block references (issue 28): ``[[Note#^id]]`` lands on the block, whose ``^id`` becomes an anchor in the doc;
a reference to a block the note lacks is reported (``missing_block``) and never stops a run; the anchors stay
out of chunks and ``read_note``; an incremental convert stays the full one when block ids or refs change."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from test_incremental import Twin

from retriever.agent.tools import BundleTools
from retriever.chunk import chunk_note
from retriever.okf import concept_texts
from vault2okf.convert import convert
from vault2okf.parse import Block, block_ref, parse_note
from vault2okf.rewrite import anchor, block_anchor


@pytest.mark.parametrize(
    "body, blocks",
    [
        ("This is a block ^dda637", [Block(0, 16, "dda637")]),
        ("- item ^Item-1  \n", [Block(0, 7, "Item-1")]),
        ("> quote\n\n^quote-id\n", [Block(2, 0, "quote-id")]),
        ("x^notid\n2 ^ 3\nid ^bad_id\nid ^two words", []),  # no space before, no id, a bad character, not at the end
        ("```\ncode ^in-code\n```\n    indented ^also-code\n%%\nhidden ^comment\n%%", []),
        ("one ^a\ntwo ^A\n", [Block(0, 4, "a")]),  # the same id again (without case): the first, reported
        ("see [[Note#^abc]]\n", []),  # a reference, not an id
    ],
)
def test_block_ids_are_found_outside_code(body: str, blocks: list[Block]) -> None:
    note = parse_note("n.md", body.encode())
    assert list(note.blocks) == blocks
    again = [p for p in note.problems if p.kind == "block"]
    assert len(again) == (1 if "^A" in body else 0)


@pytest.mark.parametrize(
    "raw, block, href",
    [
        ("^abc", "abc", "#abc"),
        ("^Abc-1", "Abc-1", "#abc-1"),
        ("Heading", None, "#heading"),
        ("H1#^abc", "abc", "#abc"),
        ("^", "", ""),
        ("^two words", "", ""),
        ("^bad_id", "", ""),
        (None, None, ""),
    ],
)
def test_block_refs_and_their_anchors(raw: str | None, block: str | None, href: str) -> None:
    assert block_ref(raw) == block
    assert anchor(raw) == href


NOTES = {
    "A.md": "# A\n\nFirst paragraph ^first\n\n- an item ^Item-2\n\n> a quote\n\n^quote\n",
    "B.md": "See [[A#^first]], [[A#^item-2|the item]], ![[A#^quote]] and [[A#^nope]] and [[A#^bad id]].\n"
    "Also [text](A.md#^first) and [[#^here]] and [[#^gone]].\n\nHere it is ^here\n",
}


def _vault(root: Path, notes: dict[str, str]) -> Path:
    for path, text in notes.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, "utf-8")
    return root


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("blocks")
    convert(_vault(root / "vault", NOTES), root / "bundle")
    return root / "bundle"


def _doc(bundle: Path, rel: str) -> str:
    return (bundle / "concepts" / rel).read_text("utf-8").split("\n---\n", 1)[1]


def test_block_ids_become_anchors_and_refs_link_to_them(bundle: Path) -> None:
    a = _doc(bundle, "A.md")
    assert 'First paragraph <a id="first"></a>' in a
    assert '- an item <a id="item-2"></a>' in a
    assert '\n<a id="quote"></a>\n' in a and "^" not in a
    b = _doc(bundle, "B.md")
    assert "[A > ^first](A.md#first)" in b
    assert "[the item](A.md#item-2)" in b
    assert "[A > ^quote](A.md#quote)" in b  # an embed of a block: a link to it, as any embed of a note
    assert "[A > ^nope](A.md#nope)" in b  # a missing block: still a link to the note, reported
    assert "[A > ^bad id](A.md)" in b  # a malformed id: no anchor, reported
    assert "[text](A.md#first)" in b
    assert "[^here](#here)" in b and "[^gone](#gone)" in b  # links into the same note stay links
    assert 'Here it is <a id="here"></a>' in b


def test_missing_blocks_are_reported_everywhere(bundle: Path) -> None:
    data = json.loads((bundle / "link-health.json").read_text("utf-8"))
    assert data["totals"]["by_status"]["missing_block"] == 3
    entries = {e["target"]: e for e in data["missing_blocks"]}
    assert set(entries) == {"A#^nope", "A#^bad id", "#^gone"}
    assert entries["A#^nope"]["why"].startswith("A.md has no block ^nope")
    assert "not a block id" in entries["A#^bad id"]["why"]
    assert entries["#^gone"]["note"] == "B.md" and entries["#^gone"]["at"] == ["B.md:2"]
    md = (bundle / "link-health.md").read_text("utf-8")
    assert "## Links to missing blocks (3 targets, 3 links)" in md and "**A#^nope** ×1 → `A.md`" in md
    html = (bundle / "link-health.html").read_text("utf-8")
    assert 'data-section="missing_blocks"' in html and 'data-status="missing_block"' in html
    con = duckdb.connect(str(bundle / "okf.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT raw, target_id, anchor, status FROM links ORDER BY line, raw").fetchall()
    finally:
        con.close()
    assert ("[[A#^nope]]", "A", "^nope", "missing_block") in rows
    assert ("[[A#^first]]", "A", "^first", "resolved") in rows
    assert ("[text](A.md#^first)", "A", "^first", "resolved") in rows
    assert ("[[#^gone]]", "B", "^gone", "missing_block") in rows
    assert ("[[#^here]]", "B", "^here", "self") in rows


def test_anchors_stay_out_of_chunks_and_read_note(bundle: Path) -> None:
    for concept in concept_texts(bundle):
        for chunk in chunk_note(concept.id, concept.title, concept.body, max_tokens=400, min_tokens=40):
            assert "<a" not in chunk.text, chunk.text  # (a link's label keeps its ^id: text, as Obsidian shows)
    chunks = [c.text for c in chunk_note("A", "A", _doc(bundle, "A.md"), min_tokens=0)]
    assert "First paragraph\n\n- an item\n\n> a quote" in chunks[0] and "^" not in chunks[0]
    tools = BundleTools(bundle)
    text = tools.read_note("A")["text"]
    assert "<a id" not in text and "First paragraph\n" in text
    assert "[A > ^first](A.md#first)" in tools.read_note("B")["text"]  # links stay links, labels as Obsidian's


def test_one_bad_note_never_stops_a_run(tmp_path: Path) -> None:
    notes = {
        "A.md": "x ^a\n" * 3 + "[[B#^]] [[B#^^]] [[B#^a#^b]] [[B#^" + "x" * 5000 + "]] [[#^]]\n",
        "B.md": "^" * 5000 + "\n" + "y ^" * 2000 + "\n",
    }
    result = convert(_vault(tmp_path / "vault", notes), tmp_path / "bundle")
    assert result.notes == 2
    data = json.loads((tmp_path / "bundle" / "link-health.json").read_text("utf-8"))
    assert data["totals"]["by_status"]["missing_block"] == 5
    assert [p["kind"] for p in data["problems"]] == ["block", "block"]  # ^a defined twice more in A


def test_incremental_follows_block_refs_and_ids(tmp_path: Path) -> None:
    """The doc of a note depends only on its own block ids; a ref's status on the target's ids: an edit of
    either gives the full convert, including a source note left as it was when its target loses the block."""
    vault = _vault(tmp_path / "vault", {"A.md": "Para one ^one\n\nPara two\n", "B.md": "Nothing yet.\n"})
    twin = Twin(vault, tmp_path)
    (vault / "B.md").write_text("Cites [[A#^one]] and [[A#^two]].\n", "utf-8")  # refs into an unchanged note
    twin.check()
    (vault / "A.md").write_text("Para one ^one\n\nPara two ^two\n", "utf-8")  # B unchanged, ^two appears
    twin.check()
    (vault / "A.md").write_text("Para one\n\nPara two ^two\n", "utf-8")  # ^one goes
    result = twin.check()
    statuses = {r.link.raw: r.resolution.status.value for r in result.report.records}
    assert statuses == {"[[A#^one]]": "missing_block", "[[A#^two]]": "resolved"}
    (vault / "B.md").write_text("Cites [[#^self]].\n\nMine ^self\n", "utf-8")
    twin.check()
    assert twin.check().unchanged  # the report read back from the cache, block refs checked again


def test_block_anchor_is_what_the_chunker_drops() -> None:
    body = f"Kept text {block_anchor('Abc-1')}\n{block_anchor('x')}\nmore"
    [chunk] = chunk_note("n", "N", body, min_tokens=0)
    assert chunk.text == "N\nKept text\n\nmore"


@pytest.mark.slow
def test_anchors_stay_out_of_the_index_and_search_snippets(tmp_path: Path, minilm) -> None:  # noqa: ANN001
    """Through a real MiniLM index: the stored chunk texts (what is embedded) and the snippets a search shows."""
    from bundle_checks import indexed_bundle

    from retriever.retrieve import Retriever

    bundle = indexed_bundle(tmp_path, NOTES)
    texts = list(Retriever.open(bundle).table.texts)
    assert any("First paragraph\n" in t for t in texts) and not any("<a id" in t for t in texts)
    hits = BundleTools(bundle).search("first paragraph item quote", k=5)["hits"]
    assert hits and not any("<a id" in h["snippet"] for h in hits)
