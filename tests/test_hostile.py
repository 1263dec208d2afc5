"""One bad note never stops a run: hostile names, values, files and lines (issue 13), each a report entry.

The whole hostile vault (tests/hostile.py) goes through the real command, ``vault2okf convert``; each group
of it also converts alone, so a failure names its cause. Unit cases pin the rules the converter applies.
"""

from __future__ import annotations

import json
import os
import time
import unicodedata
from pathlib import Path

import duckdb
import pytest
from bundle_checks import dangling_links, tree_hashes
from hostile import BUILDERS, Expect, build_hostile_vault
from typer.testing import CliRunner

from vault2okf import bundle, guard
from vault2okf.cli import app
from vault2okf.config import Config
from vault2okf.convert import convert
from vault2okf.meta import note_meta, timestamp
from vault2okf.names import assign_doc_paths
from vault2okf.parse import Note, parse_note
from vault2okf.walk import walk_vault


def listing(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under ``root`` without following links: (mode, size, mtime in ns), so a change shows."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def report(bundle: Path) -> dict:
    return json.loads((bundle / "link-health.json").read_text("utf-8"))


def missing(data: dict, expects: list[Expect]) -> list[Expect]:
    """The expectations link-health.json does not meet."""
    problems = [(p["path"], f"{p['kind']}: {p['message']}".casefold()) for p in data["problems"]]
    skipped = [(s["path"], s["reason"].casefold()) for s in data["skipped"]]
    notes = set(data["orphans"]) | {h["note"] for h in data["hubs"]}
    con_notes = set(data.get("_notes", []))
    out = []
    for e in expects:
        if e.section == "notes":
            if e.path not in con_notes and e.path not in notes:
                out.append(e)
            continue
        rows = problems if e.section == "problems" else skipped
        if not any(path == e.path and e.text.casefold() in text for path, text in rows):
            out.append(e)
    return out


def with_notes(bundle: Path) -> dict:
    """link-health.json plus the vault paths in okf.duckdb (under ``_notes``), to check notes are listed."""
    data = report(bundle)
    con = duckdb.connect(str(bundle / "okf.duckdb"), read_only=True)
    try:
        data["_notes"] = [r[0] for r in con.execute("SELECT vault_path FROM concepts").fetchall()]
    finally:
        con.close()
    return data


# --- the whole vault through the real command ---------------------------------------------------------------


def test_the_hostile_vault_converts_through_the_cli_and_every_problem_is_reported(tmp_path: Path) -> None:
    vault, expects = build_hostile_vault(tmp_path)
    before, entries = tree_hashes(vault), listing(vault)
    start = time.perf_counter()
    result = CliRunner().invoke(app, ["convert", str(vault), "-o", str(tmp_path / "bundle")])
    seconds = time.perf_counter() - start
    print(f"\nhostile vault: convert through the CLI took {seconds:.2f} s")  # a benchmark line, not a limit
    assert result.exit_code == 0, result.output
    bundle = tmp_path / "bundle"
    assert missing(with_notes(bundle), expects) == []
    markdown = (bundle / "link-health.md").read_text("utf-8")
    assert all(e.path in markdown for e in expects if e.section != "notes")
    assert tree_hashes(vault) == before
    assert listing(vault) == entries
    assert dangling_links(bundle) == []


# --- each group alone -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("group", sorted(BUILDERS))
def test_each_hostile_group_converts_alone(group: str, tmp_path: Path) -> None:
    vault, expects = build_hostile_vault(tmp_path, only=(group,))
    convert(vault, tmp_path / "bundle")
    assert missing(with_notes(tmp_path / "bundle"), expects) == []


# --- one bad note never stops a run ---------------------------------------------------------------------------


def test_an_unexpected_error_in_one_note_is_reported_and_the_rest_converts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Good.md").write_text("links to [[Bad]]\n", "utf-8")
    (vault / "Bad.md").write_text("the parser trips on this one\n", "utf-8")
    real = guard.parse_note

    def trips_on_bad(path: str, data: bytes) -> Note:  # a stand-in for a parser bug nobody has found yet
        if path == "Bad.md":
            raise IndexError("list index out of range")
        return real(path, data)

    monkeypatch.setattr(guard, "parse_note", trips_on_bad)
    result = convert(vault, tmp_path / "bundle")
    assert result.notes == 2
    problems = report(tmp_path / "bundle")["problems"]
    assert [(p["path"], p["kind"]) for p in problems] == [("Bad.md", "error")]
    assert "IndexError: list index out of range" in problems[0]["message"]
    assert "Bad.md" in (tmp_path / "bundle" / "link-health.md").read_text("utf-8")
    assert (tmp_path / "bundle" / "concepts" / "Good.md").is_file()


def test_a_doc_whose_frontmatter_cannot_be_written_keeps_the_okf_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Odd.md").write_text("---\npoison: 1\nkept: no\n---\nbody\n", "utf-8")
    real = bundle.render_doc

    def chokes_on_poison(front: dict, body: str) -> str:  # a stand-in for a value the YAML dumper rejects
        if "poison" in front:
            raise TypeError("cannot represent an object")
        return real(front, body)

    monkeypatch.setattr(bundle, "render_doc", chokes_on_poison)
    convert(vault, tmp_path / "bundle")
    doc = (tmp_path / "bundle" / "concepts" / "Odd.md").read_text("utf-8")
    assert "title: Odd" in doc and "poison" not in doc and doc.endswith("body\n")
    assert [p["kind"] for p in report(tmp_path / "bundle")["problems"]] == ["error"]


# --- point 4: names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("paths", "expected", "moved"),
    [
        (["foo.md", "foo.MD"], {"foo.md": "foo.md", "foo.MD": "foo (2).md"}, {"foo.MD"}),
        (["Foo.md", "foo.md"], {"Foo.md": "Foo.md", "foo.md": "foo (2).md"}, {"foo.md"}),
        (["index.md", "index (note).md"], {"index (note).md": "index (note).md", "index.md": "index (note) (2).md"},
         {"index.md"}),
        ([".md", "_untitled.md"], {"_untitled.md": "_untitled.md", ".md": "_untitled (2).md"}, {".md"}),
        (["a/index.md", "a/index (note).md", "a/index (note) (2).md"],
         {"a/index (note).md": "a/index (note).md", "a/index (note) (2).md": "a/index (note) (2).md",
          "a/index.md": "a/index (note) (3).md"}, {"a/index.md"}),
        (["x/index.md", "y/index.md", "log.md"],
         {"x/index.md": "x/index (note).md", "y/index.md": "y/index (note).md", "log.md": "log (note).md"}, set()),
        (["a.md", "a.md/b.md"], {"a.md": "a (2).md", "a.md/b.md": "a.md/b.md"}, {"a.md"}),  # not over a folder
    ],
)  # fmt: skip
def test_doc_paths_are_unique_by_a_fixed_rule(paths: list[str], expected: dict[str, str], moved: set[str]) -> None:
    for order in (paths, list(reversed(paths))):
        doc_of, problems = assign_doc_paths(order)
        assert doc_of == expected
        assert {p for p, _ in problems} == moved


def test_nfc_and_nfd_twins_keep_the_nfc_one_and_list_the_other(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / unicodedata.normalize("NFD", "Café.md")).write_text("NFD\n", "utf-8")
    (vault / unicodedata.normalize("NFC", "Café.md")).write_text("NFC\n", "utf-8")
    walk = walk_vault(vault)
    assert [(f.path, f.abs_path.name) for f in walk.notes] == [("Café.md", unicodedata.normalize("NFC", "Café.md"))]
    assert [p for p, _ in walk.skipped] == ["Café.md"]
    convert(vault, tmp_path / "bundle")
    assert (tmp_path / "bundle" / "concepts" / "Café.md").read_text("utf-8").endswith("NFC\n")


def test_a_file_name_that_is_not_utf8_converts_under_a_safe_name(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (Path(os.fsdecode(os.fsencode(vault) + b"/caf\xe9.md"))).write_text("Latin-1 name\n", "utf-8")
    (vault / "Other.md").write_text("links to [[caf\ufffd]]\n", "utf-8")
    convert(vault, tmp_path / "bundle")
    assert (tmp_path / "bundle" / "concepts" / "caf\ufffd.md").read_text("utf-8").endswith("Latin-1 name\n")
    problems = report(tmp_path / "bundle")["problems"]
    assert [(p["path"], p["kind"]) for p in problems] == [("caf\ufffd.md", "name")]
    assert "b'caf\\xe9.md'" in problems[0]["message"]  # the name as the disk has it, then the safe one


def test_colliding_notes_get_distinct_concept_ids_and_links_find_them(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    for name, text in {"foo.md": "lower\n", "foo.MD": "upper\n", "index.md": "[[foo.MD]]\n", "index (note).md": "x\n",
                       ".md": "[[index]]\n", "_untitled.md": "y\n"}.items():  # fmt: skip
        (vault / name).write_text(text, "utf-8")
    convert(vault, tmp_path / "bundle")
    con = duckdb.connect(str(tmp_path / "bundle" / "okf.duckdb"), read_only=True)
    ids = dict(con.execute("SELECT vault_path, id FROM concepts").fetchall())
    links = con.execute("SELECT source_id, target_id FROM links ORDER BY 1").fetchall()
    con.close()
    assert ids == {"foo.md": "foo", "foo.MD": "foo (2)", "index.md": "index (note) (2)",
                   "index (note).md": "index (note)", ".md": "_untitled (2)", "_untitled.md": "_untitled"}  # fmt: skip
    assert links == [("_untitled (2)", "index (note) (2)"), ("index (note) (2)", "foo (2)")]
    assert dangling_links(tmp_path / "bundle") == []


# --- point 5: frontmatter values ------------------------------------------------------------------------------


def test_an_impossible_date_is_kept_as_text_and_reported() -> None:
    note = parse_note("n.md", b"---\ntitle: T\ndate: 2024-02-30\n---\nbody\n")
    assert note.frontmatter == {"title": "T", "date": "2024-02-30"}
    assert [(p.kind, p.line) for p in note.problems] == [("value", 3)]
    meta = note_meta(note.path, note.frontmatter, note.body, 1_700_000_000, Config())
    assert meta.session_date is None
    assert meta.timestamp == "2023-11-14T22:13:20+00:00"  # the mtime: the date is no date


def test_a_session_number_out_of_integer_range_is_dropped_and_reported() -> None:
    meta = note_meta("Session 3.md", {"session": 3_000_000_000}, "", 0, Config())
    assert meta.session_number is None
    assert [p.kind for p in meta.problems] == ["value"]
    assert note_meta("s.md", {"session": 2**31 - 1}, "", 0, Config()).session_number == 2**31 - 1


def test_a_yaml_bomb_is_kept_as_text_and_reported() -> None:
    from hostile import BOMB

    note = parse_note("bomb.md", f"---\n{BOMB}\n---\nbody [[x]]\n".encode())
    assert note.frontmatter == {}
    assert note.frontmatter_text == BOMB + "\n"
    assert note.frontmatter_error and "YAML bomb" in note.frontmatter_error
    assert [lk.target for lk in note.links] == ["x"]


def test_modest_alias_use_is_not_a_bomb() -> None:
    note = parse_note("n.md", b"---\nbase: &b {a: 1, b: 2}\nx: *b\ny: *b\nlist: &l [1, 2, 3]\nz: [*l, *l]\n---\n")
    assert note.frontmatter_error is None
    assert note.frontmatter["z"] == [[1, 2, 3], [1, 2, 3]]


# --- point 6: the walk --------------------------------------------------------------------------------------


def test_special_files_are_skipped_and_listed(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    os.mkfifo(vault / "pipe.md")
    os.symlink("b.md", vault / "a.md")
    os.symlink("a.md", vault / "b.md")
    os.symlink(".", vault / "loop")
    (vault / "Real.md").write_text("real\n", "utf-8")
    walk = walk_vault(vault)
    assert [f.path for f in walk.notes] == ["Real.md"]
    reasons = dict(walk.skipped)
    assert "named pipe" in reasons["pipe.md"]
    assert "symlink loop" in reasons["a.md"] and "symlink loop" in reasons["b.md"]
    assert "symlink to a folder" in reasons["loop/"]


def test_out_of_range_mtimes_give_a_timestamp() -> None:
    for mtime in (1e13, -1e13, 1e300, float("inf")):
        assert timestamp({}, mtime)[:4] in ("9999", "0001")


def test_a_future_mtime_is_reported_and_kept(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Future.md").write_text("x\n", "utf-8")
    os.utime(vault / "Future.md", (0, 1e13))
    walk = walk_vault(vault)
    assert [(p, pr.kind) for p, pr in walk.problems] == [("Future.md", "mtime")]
    assert walk.notes[0].mtime == os.stat(vault / "Future.md").st_mtime  # within range here, so kept


# --- point 7: note size limit ---------------------------------------------------------------------------------


def test_a_note_over_the_size_limit_is_listed_not_parsed(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "vault2okf.toml").write_text("[convert]\nmax_note_bytes = 100\n", "utf-8")
    (vault / "Big.md").write_text("[[Small]] " * 20, "utf-8")
    (vault / "Small.md").write_text("[[Big]]\n", "utf-8")
    result = convert(vault, tmp_path / "bundle")
    assert result.notes == 2 and result.links == 1
    problems = report(tmp_path / "bundle")["problems"]
    assert [(p["path"], p["kind"]) for p in problems] == [("Big.md", "size")]
    assert "max_note_bytes" in problems[0]["message"]
