"""Names from a vault never act on their reader: planted HTML in note, folder and link names stays text when the
markdown reports and indexes are rendered with HTML allowed, and escape codes in file names reach no terminal
(`links`, `search`, `ask`, `chat` print them escaped, ``\\u001b``)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from retriever.spec import Hit, Mode, Retrieval, Via
from vault2okf.cli import app
from vault2okf.cli.render import context_lines, hit_lines, terminal
from vault2okf.convert import convert

# every element markdown-it makes of our reports; a planted name must add none
MARKDOWN_TAGS = {"h1", "h2", "p", "ul", "li", "strong", "em", "code", "table", "thead", "tbody", "tr", "th", "td", "a"}
PLANTED = {  # vault path -> text; each name holds markup that would run or show as HTML if written raw
    "<script>alert(1)<.md": "An orphan whose name opens a script.\n",
    "<img src=x onerror=alert(2)>.md": "An orphan whose name is an image.\n",
    "a`<iframe src=x>`b.md": "Links [[<script>alert(3)</script>]] and [[Dup]] and [[Target]].\n",
    "<svg onload=alert(4)>/Dup.md": "One Dup.\n",
    "Other/Dup.md": "Another Dup.\n",
    "<u>Bad front.md": "---\ntitle: [unclosed <b>\n---\nMalformed frontmatter.\n",
    "Target.md": "The target.\n",
    "Esc \x1b]0;pwned\x07 \x1b[2J \x9b31m name.md": "Names Target without linking it.\n",
}
ESCAPES = ("\x1b", "\x07", "\x9b")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-output")
    vault = root / "vault<img src=x onerror=alert(0)>"
    for rel, text in PLANTED.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text, "utf-8")
    convert(vault, root / "bundle")
    return root / "bundle"


class Elements(HTMLParser):
    """The start tags and the text of an HTML fragment."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.text: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def rendered(path: Path) -> Elements:
    """``path`` rendered as CommonMark with GFM tables and raw HTML allowed (as Obsidian or a site would), its
    frontmatter set aside as they do."""
    text = path.read_text("utf-8")
    if text.startswith("---\n"):
        text = text[text.index("\n---\n", 3) + 5 :]
    return Elements(MarkdownIt("commonmark", {"html": True}).enable("table").render(text))


def test_the_link_health_report_renders_no_planted_html(bundle: Path) -> None:
    page = rendered(bundle / "link-health.md")
    assert page.tags <= MARKDOWN_TAGS, page.tags - MARKDOWN_TAGS
    shown = "".join(page.text)  # the names are still there, as text
    for name in ("<script>alert(3)</script>", "<img src=x onerror=alert(2)>", "<svg onload=alert(4)>/Dup.md",
                 "a`<iframe src=x>`b.md", "<u>Bad front.md", "vault<img src=x onerror=alert(0)>"):  # fmt: skip
        assert name in shown, name
    assert not any(c in shown for c in ESCAPES)


def test_the_indexes_render_no_planted_html(bundle: Path) -> None:
    indexes = sorted(bundle.rglob("index.md"))
    assert len(indexes) == 4  # the root, concepts/ and its two folders
    for index in indexes:
        page = rendered(index)
        assert page.tags <= MARKDOWN_TAGS, (index, page.tags - MARKDOWN_TAGS)
    top = "".join(rendered(bundle / "concepts" / "index.md").text)
    assert "<img src=x onerror=alert(2)>" in top and "<script>alert(1)<" in top


def no_escapes(text: str) -> bool:
    return not any(c in text for c in ESCAPES)


def test_links_prints_no_escape_code_from_a_file_name(bundle: Path) -> None:
    runner = CliRunner()
    for args in ([], ["--json"], ["--mentions"]):  # color=True: printed as to a terminal, nothing stripped
        result = runner.invoke(app, ["links", str(bundle), *args], color=True)
        assert result.exit_code == 0, result.output
        assert no_escapes(result.output), (args, result.output)
    report = json.loads(runner.invoke(app, ["links", str(bundle), "--json"], color=True).output)
    assert any("\x1b]0;pwned\x07" in o and "\x9b31m" in o for o in report["orphans"])  # the name, as it is
    mentions = runner.invoke(app, ["links", str(bundle), "--mentions"], color=True).output
    assert "Esc \\u001b]0;pwned\\u0007 \\u001b[2J \\u009b31m name.md:1" in mentions  # shown escaped, not dropped


def hit(path: str) -> Hit:
    return Hit(note_id=path[:-3], title=path[:-3], vault_path=path, doc_path=f"concepts/{path}", score=0.5,
               via=Via.VECTOR, text="…", tokens=3)  # fmt: skip


def test_search_and_ask_print_file_names_escaped() -> None:
    name = "Esc \x1b]0;pwned\x07 \x1b[2J \x9b31m\r name.md"
    retrieval = Retrieval(hits=(hit(name), hit("Plain.md")), mode=Mode.UNION, k=2, ranker=None)
    lines = hit_lines(retrieval) + context_lines(None, retrieval.hits)
    assert all(no_escapes(line) and "\r" not in line for line in lines)
    assert lines[1].endswith("Esc \\u001b]0;pwned\\u0007 \\u001b[2J \\u009b31m\\u000d name.md")
    payload = json.dumps({"hits": [h.to_json() for h in retrieval.hits]}, ensure_ascii=False)  # search --json
    assert json.loads(terminal(payload)) == json.loads(payload) and no_escapes(terminal(payload))
    assert terminal("a\tb\nc") == "a\tb\nc"  # tab and newline are kept
    # a right-to-left override makes "Invoice \u202eexe.pdf" show as "Invoice fdp.exe": escaped, it shows what it holds
    assert terminal("Invoice \u202eexe.pdf") == "Invoice \\u202eexe.pdf" and terminal("a\u2066b") == "a\\u2066b"
