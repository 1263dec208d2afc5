"""The whole bundle is an OKF v0.2 bundle, as two third-party validators read it: basic-memory's
(`basic-memory okf check`) and okf-cli's (`okf validate`), and okf-cli's `okf list` and `okf read` read the concepts
as convert writes them. Both need Python >= 3.12, so they live in their own virtual environment,
``$VAULT2OKF_OKF_VALIDATORS`` (default ``~/.cache/vault2okf/okf-validators``), made by `make okf-validators`;
without it those tests skip, saying so. The structure they check (every doc but an index typed, only the root
``index.md`` with frontmatter, ``SKILL.md`` still an Agent Skill) is also checked here without them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import duckdb
import pytest
import yaml

from vault2okf.convert import convert

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"
VALIDATORS = Path(os.environ.get("VAULT2OKF_OKF_VALIDATORS", Path.home() / ".cache" / "vault2okf" / "okf-validators"))
RESERVED = {"index.md", "log.md"}
SKILL_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # the Agent Skills spec: lowercase, single hyphens inside


def tricky_vault(root: Path) -> Path:
    """Notes that stress the OKF rules: reserved names at the top and in a folder, a note named only ``.md``,
    malformed frontmatter, an empty and a list ``type``, an attachment, HTML, an escape code and CJK in names."""
    vault = root / "tricky"
    notes = {
        "index.md": "Home: [[Folder/log]], [[No front]], [[東京]] and [[Missing note]].\n![[pic.png]]\n",
        "Folder/log.md": "A log note, not an OKF log.\n",
        "Folder/Deeper/index.md": "An index note deeper down.\n",
        "No front.md": "Plain text, no frontmatter.\n",
        "Bad front.md": "---\ntitle: [unclosed\n---\nMalformed frontmatter.\n",
        "Empty type.md": '---\ntype: ""\n---\nAn empty type.\n',
        "List type.md": "---\ntype: [a, b]\ntitle: Two types\n---\nA list as its type.\n",
        "Only dashes.md": "---\n---\nEmpty frontmatter.\n",
        "<img src=x onerror=alert(1)>.md": "A name that is HTML.\n",
        "Esc \x1b[2J name.md": "A name with an escape code.\n",
        "東京.md": "---\naliases: [Tokyo]\n---\nA CJK name.\n",
        ".md": "A note named only .md.\n",
    }
    for rel, text in notes.items():
        path = vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    (vault / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return vault


@pytest.fixture(scope="module", params=["children-of-ash", "tricky"])
def bundle(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("okf")
    vault = VAULTS / "children-of-ash" if request.param == "children-of-ash" else tricky_vault(root)
    convert(vault, root / "bundle")
    return root / "bundle"


def front(text: str) -> dict | None:
    """The YAML frontmatter of a markdown file, None when it has none."""
    if not text.startswith("---\n"):
        return None
    return yaml.safe_load(text[4 : text.index("\n---\n", 3)]) or {}


def markdown_files(bundle: Path) -> dict[str, str]:
    return {p.relative_to(bundle).as_posix(): p.read_text("utf-8") for p in bundle.rglob("*.md")}


def concepts(bundle: Path) -> dict[str, tuple[str, str]]:
    """Concept id as okf-cli names it (the doc's path without ``.md``) -> (type, title), from okf.duckdb."""
    with duckdb.connect(str(bundle / "okf.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT doc_path, type, title FROM concepts").fetchall()
    return {doc[:-3]: (type_, title) for doc, type_, title in rows}


# -- the structure, checked here (runs everywhere) -------------------------------------------------------------


def test_every_doc_but_an_index_is_typed_and_only_the_root_index_has_frontmatter(bundle: Path) -> None:
    files = markdown_files(bundle)
    assert {"index.md", "SKILL.md", "link-health.md", "concepts/index.md"} <= set(files)
    for rel, text in files.items():
        head = front(text)
        if rel.rsplit("/", 1)[-1] in RESERVED:
            assert head == ({"okf_version": "0.2"} if rel == "index.md" else None), rel
        else:
            assert isinstance(head, dict) and isinstance(head.get("type"), str) and head["type"].strip(), rel
    root = files["index.md"]
    for target in ("concepts/index.md", "SKILL.md", "link-health.md"):  # the root index leads to the rest
        assert f"]({target})" in root


def test_skill_md_is_typed_and_still_an_agent_skill(bundle: Path) -> None:
    text = (bundle / "SKILL.md").read_text("utf-8")
    head = front(text)
    assert head is not None and set(head) == {"name", "description", "type"} and head["type"] == "skill"
    assert SKILL_NAME.fullmatch(head["name"]) and len(head["name"]) <= 64
    assert 0 < len(head["description"]) <= 1024 and "<" not in head["description"]
    assert text.split("\n---\n", 1)[1].strip()  # a body


def test_link_health_md_is_a_typed_doc(bundle: Path) -> None:
    head = front((bundle / "link-health.md").read_text("utf-8"))
    assert head is not None and head["type"] == "report" and head["title"].startswith("Link health: ")


# -- the third-party validators (their own Python 3.12 environment) --------------------------------------------


def tool(name: str) -> Path:
    path = VALIDATORS / "bin" / name
    if not path.is_file():
        pytest.skip(
            f"no {name} in {VALIDATORS}: run `make okf-validators` (basic-memory and okf-cli need Python >= 3.12), "
            "or point VAULT2OKF_OKF_VALIDATORS at a virtual environment holding them"
        )
    return path


def run(name: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "4000", "NO_COLOR": "1", "TERM": "dumb"}  # rich: no wrapping, no colour
    return subprocess.run([tool(name), *map(str, args)], capture_output=True, text=True, env=env, timeout=300)


def test_basic_memory_okf_check_accepts_the_whole_bundle(bundle: Path) -> None:
    done = run("basic-memory", "okf", "check", "--json", bundle)
    report = json.loads(done.stdout)
    assert report["diagnostics"] == [] and done.returncode == 0, done.stdout + done.stderr
    typed = [rel for rel in markdown_files(bundle) if rel.rsplit("/", 1)[-1] not in RESERVED]
    assert report["concepts"] == len(typed) == len(concepts(bundle)) + 2  # the notes, SKILL.md, link-health.md


def test_okf_validate_accepts_the_whole_bundle(bundle: Path) -> None:
    done = run("okf", "validate", bundle)
    files = len(markdown_files(bundle))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{files} files: {files} ok" in done.stdout and "Error" not in done.stderr


def listed(table: str) -> dict[str, tuple[str, str]]:
    """``okf list``'s rich table: id -> (type, title), from its rows (a wrapped row's later lines have no id)."""
    rows: dict[str, tuple[str, str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 4 and cells[0] and cells[0] != "ID":
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def test_okf_list_names_every_concept_with_its_type_and_title(bundle: Path) -> None:
    done = run("okf", "list", bundle)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = listed(done.stdout)
    expected = {cid: (type_, title or cid.rsplit("/", 1)[-1]) for cid, (type_, title) in concepts(bundle).items()}
    assert {k: v for k, v in rows.items() if k.startswith("concepts/")} == expected
    assert rows["SKILL"][0] == "skill" and rows["link-health"][0] == "report"


def test_okf_read_prints_a_concept_as_written(bundle: Path) -> None:
    ids = sorted(cid for cid in concepts(bundle) if "\x1b" not in cid)
    picked = {ids[0], *(next((c for c in ids if mark in c), ids[0]) for mark in ("(note)", "<"))}
    for cid in sorted(picked):  # a first one, a renamed reserved name, a name that is HTML
        done = run("okf", "read", bundle, cid)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout == (bundle / f"{cid}.md").read_text("utf-8"), cid


@pytest.fixture(scope="session")
def validators() -> Path:
    """The validators' environment, or a skip saying why, before a session fixture is built for them."""
    tool("basic-memory"), tool("okf")
    return VALIDATORS


def test_an_indexed_bundle_is_still_valid(validators: Path, coa_bundle: Path) -> None:
    """The index's state under ``.vault2okf/`` (Chroma, the ONNX encoder, caches) breaks no OKF rule: basic-memory
    walks every file, symlinks and special files included. The session's indexed bundle, shared with the serve
    tests."""
    done = run("basic-memory", "okf", "check", "--json", coa_bundle)
    assert json.loads(done.stdout)["diagnostics"] == [] and done.returncode == 0, done.stdout + done.stderr
    assert (coa_bundle / ".vault2okf" / "chroma").is_dir()
    assert run("okf", "validate", coa_bundle).returncode == 0
