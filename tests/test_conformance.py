"""Conformance with obsidian-export's test vaults (issue 28), read in place from ``../shared/conformance``.

Each case's ``input/`` vault is converted; then every link of each file in ``expected/`` (what obsidian-export
writes) is compared with the links of our doc for the same note: the file it points at, its ``#anchor`` and its
label, in document order. Escaping is normalised by comparing what markdown-it renders, and targets after
percent-decoding (``N%C3%B6te%20with%20'quotes'.md`` = ``<Nöte with 'quotes'.md>``). The only differences
allowed are the two the folder's README lists, written out below link by link (``INTENDED``); a difference
listed there that no longer happens fails too, so the list stays exact.

Not compared: ``filter-by-tags`` (exporting by frontmatter tags), ``single-file`` and ``start-at/single-file``
(exporting one note alone): modes vault2okf does not have. ``postprocessors``'s ``Note_embed_*`` files are the
same input run through obsidian-export's postprocessor hooks, also not ours.
"""

from __future__ import annotations

import json
import posixpath
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import duckdb
import pytest
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token

from vault2okf.convert import convert
from vault2okf.rewrite import slugify

ROOT = Path(__file__).resolve().parents[2] / "shared" / "conformance" / "obsidian-export"
EMBED = "an embed stays a link to the note's doc (they inline the note)"
BROKEN = "a link that resolves to nothing is written as its text (they keep a markdown link as written)"


@dataclass(frozen=True, order=True)
class Found:
    """One link as a reader meets it: image or link, the file (case-relative, NFC), the anchor, the label."""

    kind: str
    target: str
    anchor: str
    label: str  # the label as markdown-it renders it (HTML), so escaping differences vanish


# case -> the expected files compared (None: every one)
CASES: dict[str, tuple[str, ...] | None] = {
    "main-samples": None,
    "non-ascii": None,
    "same-filename-different-directories": None,
    "infinite-recursion": None,
    "start-at": ("subdir/Note B.md", "subdir/Note C.md"),
    "postprocessors": ("Note.md", "hard_linebreaks.md"),
}


def _link(kind: str, target: str, anchor: str, label: str) -> Found:
    return Found(kind, target, anchor, label)


# (case, file) -> [(side, link, reason)]: "theirs" only in expected/, "ours" only in our doc
INTENDED: dict[tuple[str, str], list[tuple[str, Found, str]]] = {
    ("main-samples", "embeds-note-in-subdir.md"): [
        ("theirs", _link("link", "pure-markdown-examples.md", "", "pure-markdown-examples"), EMBED),
        ("ours", _link("link", "subdir/note-in-subdir.md", "", "note-in-subdir"), EMBED),
    ],
    ("main-samples", "embeds-partial-note.md"): [
        ("ours", _link("link", "note-with-headings.md", "heading", "note-with-headings &gt; heading"), EMBED),
    ],
    ("main-samples", "embeds.md"): [
        ("ours", _link("link", "note-with-frontmatter.md", "", "note-with-frontmatter"), EMBED),
        ("ours", _link("link", "note-with-frontmatter.md", "", "note-with-frontmatter"), EMBED),
    ],
    ("main-samples", "pure-markdown-examples.md"): [
        ("theirs", _link("link", "link-location.md", "", "link text"), BROKEN),
    ],
    ("non-ascii", "Embed.md"): [
        ("ours", _link("link", "Nöte with 'quotes'.md", "", "Nöte with 'quotes'"), EMBED),
    ],
    ("same-filename-different-directories", "Note.md"): [
        ("ours", _link("link", "dir1/Note.md", "", "Note"), EMBED),
        ("ours", _link("link", "dir2/Note.md", "", "Note"), EMBED),
    ],
    ("infinite-recursion", "Note A.md"): [
        ("theirs", _link("link", "Note A.md", "", "Note A"), EMBED),  # C's embed of A, inside A
        ("ours", _link("link", "Note B.md", "", "Note B"), EMBED),
    ],
    ("postprocessors", "Note.md"): [
        ("ours", _link("link", "_embed.md", "", "_embed"), EMBED),
    ],
}

_MD = MarkdownIt("commonmark").enable("table")
_HTML = RendererHTML()
_ANCHOR = re.compile(r'<a id="([^"]+)"></a>')
# a footnote definition (``[^fn1]: Footnote``), which plain CommonMark would take for a link definition
_FOOTNOTE = re.compile(r"^\[\^[^\]\n]+\]:.*$", re.MULTILINE)


def _body(text: str) -> str:
    """The text without its YAML frontmatter and footnote definitions (footnotes are not links)."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end != -1:
            text = text[end + 5 :]
    return _FOOTNOTE.sub("", text)


def links_of(doc: Path, rel: str) -> list[Found]:
    """Every link and image of a markdown file at ``rel`` (its path in the case), in document order."""
    out = []
    for block in _MD.parse(_body(doc.read_text("utf-8"))):
        out += list(_inline_links(block.children or [], rel))
    return out


def _inline_links(tokens: list[Token], rel: str) -> Iterator[Found]:
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.type == "image":
            yield _found("image", str(token.attrs["src"]), token.children or [], rel)
        elif token.type == "link_open":
            end = next(j for j in range(i, len(tokens)) if tokens[j].type == "link_close")
            yield _found("link", str(token.attrs["href"]), tokens[i + 1 : end], rel)
            i = end
        i += 1


def _found(kind: str, href: str, label: list[Token], rel: str) -> Found:
    path, _, anchor = href.partition("#")
    path = unicodedata.normalize("NFC", unquote(path))
    target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), path)) if path else rel
    text = _HTML.renderInline(label, _MD.options, {}).strip()
    return Found(kind, target, unquote(anchor), text)


def _converted(case: str, tmp: Path) -> Path:
    bundle = tmp / case
    convert(ROOT / "input" / case, bundle)
    return bundle


def _expected_files(case: str) -> list[str]:
    chosen = CASES[case]
    if chosen is not None:
        return list(chosen)
    root = ROOT / "expected" / case
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md"))


def _remove(links: list[Found], gone: list[Found]) -> list[Found]:
    """``links`` without one occurrence of each of ``gone`` (all must be there)."""
    left = list(links)
    for link in gone:
        assert link in left, f"an intended difference no longer happens: {link}"
        left.remove(link)
    return left


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not ROOT.is_dir():
        pytest.skip(f"{ROOT} not present")
    tmp = tmp_path_factory.mktemp("conformance")
    return {case: _converted(case, tmp) for case in CASES}


def compare(case: str, bundle: Path) -> tuple[int, int]:
    """Assert every expected link matches ours but for the intended differences: (links compared, differing)."""
    compared = differing = 0
    for rel in _expected_files(case):
        theirs = links_of(ROOT / "expected" / case / rel, rel)
        ours = links_of(bundle / "concepts" / rel, rel)
        allowed = INTENDED.get((case, rel), [])
        theirs_left = _remove(theirs, [link for side, link, _ in allowed if side == "theirs"])
        ours_left = _remove(ours, [link for side, link, _ in allowed if side == "ours"])
        assert ours_left == theirs_left, f"{case}/{rel}"
        compared += len(theirs)
        differing += len(theirs) - len(theirs_left)
    return compared, differing


@pytest.mark.parametrize("case", list(CASES))
def test_links_match_obsidian_export(case: str, bundles: dict[str, Path]) -> None:
    compared, differing = compare(case, bundles[case])
    assert compared > 0 or case == "postprocessors"


def test_how_many_links_are_compared(bundles: dict[str, Path]) -> None:
    """The count the issue asks for: 37 links of expected/ compared, 3 of them differing on purpose (two
    embeds they inline, one markdown link to a missing file they keep), and 9 of our links with no
    counterpart (embeds we keep as links). It changes only when the cases or the case list change."""
    counts = [compare(case, bundles[case]) for case in CASES]
    compared, differing = sum(c for c, _ in counts), sum(d for _, d in counts)
    assert (compared, differing) == (37, 3)
    assert sum(len(v) for v in INTENDED.values()) == 12  # 3 of theirs, 9 of ours


def _doc_anchors(doc: Path) -> set[str]:
    """The ``#anchors`` a doc offers: its headings' slugs and its block anchors."""
    text = _body(doc.read_text("utf-8"))
    tokens = _MD.parse(text)
    slugs = {slugify(tokens[i + 1].content) for i, t in enumerate(tokens) if t.type == "heading_open"}
    return slugs | set(_ANCHOR.findall(text))


def test_every_anchor_lands_but_the_reported_missing_blocks(bundles: dict[str, Path]) -> None:
    """A link's ``#anchor`` names a heading or a block anchor of its target doc; the only exceptions are the
    block references the link-health report lists as missing blocks (``[[foo#^abc]]``: foo has no ^abc)."""
    bundle = bundles["main-samples"]
    concepts = bundle / "concepts"
    dangling: Counter[tuple[str, str, str]] = Counter()
    for doc in sorted(concepts.rglob("*.md")):
        rel = doc.relative_to(concepts).as_posix()
        for link in links_of(doc, rel):
            target = concepts / link.target
            if link.anchor and target.suffix == ".md" and link.anchor not in _doc_anchors(target):
                dangling[(rel, link.target, link.anchor)] += 1
    assert dangling == {("issue-188-wikilinks-need-trimming.md", "foo.md", "abc"): 4}
    assert 'This is a block <a id="dda637"></a>' in (concepts / "section-ref-a.md").read_text("utf-8")


def test_block_refs_in_the_report_and_the_database(bundles: dict[str, Path]) -> None:
    bundle = bundles["main-samples"]
    data = json.loads((bundle / "link-health.json").read_text("utf-8"))
    assert data["totals"]["by_status"]["missing_block"] == 4
    [entry] = data["missing_blocks"]
    assert (entry["target"], entry["count"], entry["note"]) == ("foo#^abc", 4, "foo.md")
    assert "foo.md has no block ^abc" in entry["why"]
    assert "Links to missing blocks" in (bundle / "link-health.md").read_text("utf-8")
    assert 'data-section="missing_blocks"' in (bundle / "link-health.html").read_text("utf-8")
    con = duckdb.connect(str(bundle / "okf.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT source_id, target_id, anchor, status FROM links WHERE anchor LIKE '^%' ORDER BY source_id, line"
        ).fetchall()
    finally:
        con.close()
    assert rows == [
        *[("issue-188-wikilinks-need-trimming", "foo", "^abc", "missing_block")] * 4,
        ("section-ref-a", "section-ref-a", "^dda637", "self"),
        ("section-ref-b", "section-ref-a", "^dda637", "resolved"),
    ]
