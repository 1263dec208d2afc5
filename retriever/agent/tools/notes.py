"""Notes as the tools name and read them: which concept id a model's name means (``Notes.resolve``), a concept
doc's text without frontmatter and block anchors, and its sections by heading."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from urllib.parse import unquote

from markdown_it import MarkdownIt

from retriever.agent.tools.results import ToolError
from retriever.agent.tools.sandbox import Sandbox
from retriever.chunk import BLOCK_ANCHOR

SPACE = re.compile(r"\s+")
_BLOCKS = MarkdownIt("commonmark").disable("inline")


class Notes:
    """The notes of one bundle: their ids by every name a model may use, and their docs."""

    def __init__(self, bundle: Path, db: Sandbox) -> None:
        self.bundle = bundle
        self._db = db
        self._names: dict[str, str] | None = None

    def resolve(self, note: str) -> str:
        """The concept id ``note`` names: an id, a doc or vault path (percent-encoded or not) or a unique title;
        an id wins over a vault path that spells the same."""
        names = self._index()
        raw = str(note).strip()
        wanted = unquote(raw).replace("\\", "/").split("#", 1)[0]
        wanted = re.sub(r"^(\.\.?/)+|^/+", "", wanted)
        wanted = wanted.removeprefix("concepts/").removesuffix(".md")
        for key in (raw, wanted):
            if key in names.values():
                return key
        found = names.get(wanted.casefold())
        if found:
            return found
        close = difflib.get_close_matches(wanted.casefold(), list(names), n=5, cutoff=0.6)
        ids = dict.fromkeys(names[c] for c in close)  # a title and a path may both name one id
        hint = f"; did you mean {', '.join(map(repr, ids))}?" if close else "; use search to find ids"
        raise ToolError(f"no note {raw!r} in this bundle{hint}")

    def ids(self) -> set[str]:
        """Every concept id of the bundle."""
        return set(self._index().values())

    def doc(self, doc_path: str) -> str:
        """The concept doc at ``doc_path`` (bundle-relative), as text."""
        root = self.bundle.resolve()
        path = (root / doc_path).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise ToolError(f"the doc {doc_path} is missing from the bundle: re-convert it")
        return path.read_text(encoding="utf-8", errors="replace")

    def _index(self) -> dict[str, str]:
        """Case-folded id, and title or file name when only one note has it, -> id."""
        if self._names is None:
            rows = self._db.select("SELECT id, title, vault_path FROM concepts ORDER BY id")
            names: dict[str, list[str]] = {}
            for cid, title, _ in rows:
                for name in {title.casefold(), cid.rsplit("/", 1)[-1].casefold()}:
                    names.setdefault(name, []).append(cid)
            index = {name: cids[0] for name, cids in names.items() if len(cids) == 1}
            # the vault path (without .md) names its note even where the id differs from it (a reserved file
            # name, a renamed folder type), so a client holding a vault path need not know the id rules
            index.update({str(path).removesuffix(".md").casefold(): cid for cid, _, path in rows if path})
            index.update({cid.casefold(): cid for cid, _, _ in rows})
            self._names = index
        return self._names


def doc_body(doc: str) -> str:
    """The doc without its YAML frontmatter (read_note gives the fields from the database) and its block
    anchors (markup for renderers, not text for a model)."""
    if doc.startswith("---\n"):
        end = doc.find("\n---\n", 4)
        if end != -1:
            doc = doc[end + 5 :].lstrip("\n")
    return BLOCK_ANCHOR.sub("", doc) if "<a id=" in doc else doc


def sections(text: str) -> list[tuple[str, int, str]]:
    """(heading text, level, section text from its heading to the next heading of the same or higher level)."""
    lines = text.splitlines()
    heads = [
        (tok.map[0], int(tok.tag[1:]), SPACE.sub(" ", tokens[i + 1].content).strip())
        for tokens in [_BLOCKS.parse(text)]
        for i, tok in enumerate(tokens)
        if tok.type == "heading_open" and tok.level == 0 and tok.map
    ]
    out = []
    for n, (line, level, title) in enumerate(heads):
        end = next((ln for ln, lv, _ in heads[n + 1 :] if lv <= level), len(lines))
        out.append((title, level, "\n".join(lines[line:end]).strip()))
    return out


def section(parts: list[tuple[str, int, str]], heading: str, note: str, headings: list[str]) -> str:
    """The text of the section ``heading`` names: the same heading folded, else the first that contains it."""
    want = fold_heading(heading)
    for title, _, text in parts:
        if title and fold_heading(title) == want:
            return text
    for title, _, text in parts:
        if title and want in fold_heading(title):
            return text
    raise ToolError(f"{note!r} has no heading {heading!r}; its headings are: {'; '.join(headings) or 'none'}")


def fold_heading(heading: str) -> str:
    """A heading compared without case, punctuation or markup: 'Act 1, Session 0' = 'act-1-session-0'."""
    return SPACE.sub(" ", re.sub(r"[^\w\s]|_", " ", unquote(heading).replace("-", " "))).strip().casefold()
