"""The converter on the three real shared vaults: no crash, no dangling link, vault untouched, idempotent."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from bundle_checks import dangling_links, database_rows, tree_hashes

from vault2okf.convert import convert
from vault2okf.db import connect

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"
NAMES = ["blades-of-vengeance", "children-of-ash", "thellade"]


@pytest.fixture(scope="module", params=NAMES)
def converted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    vault = VAULTS / request.param
    if not vault.is_dir():
        pytest.skip(f"{vault} not present")
    before = tree_hashes(vault)
    out = tmp_path_factory.mktemp(request.param) / "bundle"
    convert(vault, out)
    return vault, out, before


def test_every_output_link_points_at_a_file_in_the_bundle(converted: tuple[Path, Path, dict]) -> None:
    _, out, _ = converted
    assert dangling_links(out) == []


def test_vault_is_byte_identical_after_conversion(converted: tuple[Path, Path, dict]) -> None:
    vault, _, before = converted
    assert tree_hashes(vault) == before


def test_converting_twice_gives_identical_bundles(converted: tuple[Path, Path, dict], tmp_path: Path) -> None:
    vault, out, _ = converted
    again = tmp_path / "bundle"  # same folder name: SKILL.md is named after it
    convert(vault, again)
    assert tree_hashes(again, skip=("okf.duckdb",)) == tree_hashes(out, skip=("okf.duckdb",))
    assert database_rows(again) == database_rows(out)


def test_reconverting_in_place_keeps_the_bundle_and_its_index_state(
    converted: tuple[Path, Path, dict], tmp_path: Path
) -> None:
    vault, out, _ = converted
    bundle = tmp_path / "bundle"
    shutil.copytree(out, bundle)
    (bundle / ".vault2okf" / "index.json").write_text("{}", "utf-8")
    convert(vault, bundle)
    assert (bundle / ".vault2okf" / "index.json").read_text("utf-8") == "{}"
    assert tree_hashes(bundle, skip=("okf.duckdb", "index.json")) == tree_hashes(out, skip=("okf.duckdb",))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".bundle")]  # no staging folder left


def test_database_matches_the_docs(converted: tuple[Path, Path, dict]) -> None:
    _, out, _ = converted
    con = connect(out)
    try:
        docs = {r[0] for r in con.execute("SELECT doc_path FROM concepts").fetchall()}
        dangling = con.execute(
            "SELECT count(*) FROM links l LEFT JOIN concepts c ON l.target_id = c.id "
            "WHERE l.target_id IS NOT NULL AND c.id IS NULL"
        ).fetchone()
    finally:
        con.close()
    assert docs == {
        f"concepts/{p.relative_to(out / 'concepts').as_posix()}"
        for p in (out / "concepts").rglob("*.md")
        if p.name != "index.md"
    }
    assert dangling == (0,)


def test_report_totals_are_consistent(converted: tuple[Path, Path, dict]) -> None:
    _, out, _ = converted
    report = json.loads((out / "link-health.json").read_text("utf-8"))
    totals = report["totals"]
    assert sum(totals["by_status"].values()) == totals["links"] + totals["embeds"]
    assert sum(e["count"] for e in report["broken"]) == totals["by_status"]["broken"]
    assert all(len(e["candidates"]) >= 2 and e["chosen"][0] in e["candidates"] for e in report["ambiguous"])


def test_an_edited_note_changes_only_its_own_doc(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(VAULTS / "children-of-ash", vault)
    convert(vault, tmp_path / "a" / "bundle")
    note = vault / "NPCs" / "ECHO.md"
    stat = note.stat()
    note.write_text(note.read_text("utf-8") + "\nA new line about ECHO.\n", "utf-8")
    os.utime(note, (stat.st_atime, stat.st_mtime))
    convert(vault, tmp_path / "b" / "bundle")
    a, b = (tree_hashes(tmp_path / x / "bundle", skip=("okf.duckdb",)) for x in "ab")
    assert sorted(k for k in a if a[k] != b.get(k)) == ["concepts/NPCs/ECHO.md"]
    rows_a, rows_b = (database_rows(tmp_path / x / "bundle") for x in "ab")
    changed = [r for r in rows_b["concepts"] if r not in rows_a["concepts"]]
    assert [r[0] for r in changed] == ["NPCs/ECHO"]
    assert rows_a["links"] == rows_b["links"]


def test_bundle_conforms_to_okf_and_agent_skills(converted: tuple[Path, Path, dict]) -> None:
    """Every doc has YAML with a type; an index.md has no frontmatter but the bundle root's okf_version; SKILL.md
    has a lowercase-hyphen name and a description of at most 1024 characters (tests/test_okf_validators.py runs
    two third-party OKF validators over the whole bundle)."""
    _, out, _ = converted
    for doc in out.rglob("*.md"):
        text = doc.read_text("utf-8")
        if doc.name == "index.md":
            head = text.split("---\n")[1] if text.startswith("---\n") else None
            assert head == ('okf_version: "0.2"\n' if doc.parent == out else None), doc
            continue
        front = yaml.safe_load(text.split("---\n")[1])
        assert isinstance(front, dict) and isinstance(front.get("type"), str) and front["type"].strip(), doc
    skill = yaml.safe_load((out / "SKILL.md").read_text("utf-8").split("---\n")[1])
    assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", skill["name"]) and len(skill["name"]) <= 64
    assert 0 < len(skill["description"]) <= 1024
