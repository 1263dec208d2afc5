"""Checks on a written bundle, shared by the fixture and real-vault tests."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from urllib.parse import unquote

import duckdb

from vault2okf.bundle import LISTING
from vault2okf.cache import BASE as CACHE_BASE
from vault2okf.cache import NAME as CACHE_NAME

_LINK = re.compile(r"!?\[(?:\\.|[^\[\]\\\n])*\]\(\s*(<[^<>\n]*>|[^()\s]*)\s*(?:\"[^\"\n]*\")?\)")  # linear
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def dangling_links(bundle: Path) -> list[str]:
    """``doc: target`` for every markdown link in the concept tree that does not point at an existing file."""
    concepts = bundle / "concepts"
    bad = []
    for doc in sorted(concepts.rglob("*.md")):
        for target in _LINK.findall(doc.read_text("utf-8")):
            target = target.strip("<>")
            if _SCHEME.match(target) or target.startswith("#") or not target:
                continue
            path = (doc.parent / unquote(target.split("#", 1)[0])).resolve()
            if not path.is_file() or not path.is_relative_to(concepts.resolve()):
                bad.append(f"{doc.relative_to(bundle)}: {target}")
    return bad


def tree_hashes(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """sha256 of every file under ``root`` (relative path -> digest), skipping names in ``skip``, the convert cache
    and its base of states, and the bundle's listing (state that records file times and inodes, not content)."""
    skip = (*skip, CACHE_NAME, CACHE_BASE, LISTING.rsplit("/", 1)[1])
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part in skip for part in p.relative_to(root).parts)
    }


def database_rows(bundle: Path) -> dict[str, list[tuple]]:
    """Every row of every table of ``okf.duckdb``, sorted: the file's contents, not its bytes."""
    con = duckdb.connect(str(bundle / "okf.duckdb"), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()]
        return {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}
    finally:
        con.close()


def indexed_bundle(root: Path, notes: dict[str, str]) -> Path:
    """A vault of ``notes`` (path -> text) under ``root``, converted and indexed with MiniLM: ``root/bundle``."""
    from retriever.index import index_bundle
    from vault2okf.convert import convert

    for path, text in notes.items():
        (root / "vault" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "vault" / path).write_text(text + "\n", "utf-8")
    convert(root / "vault", root / "bundle")
    index_bundle(root / "bundle", embedder_name="minilm", progress=False)
    return root / "bundle"
