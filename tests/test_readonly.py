"""A bundle on a read-only file system (a share, a container volume): everything that only reads it works, and
`index` says in one line that it cannot write (issue 26, point 6). The bundle is bind-mounted read-only, which
needs root; elsewhere the tests skip, saying why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bundle_checks import indexed_bundle

EXE = Path(sys.executable).with_name("vault2okf")
NOTES = {
    "People/Mira.md": "Mira is a smuggler at the Saltreach docks. She owes [[Tam]] a boat.",
    "People/Tam.md": "Tam runs the ferry across the river.",
    "Sessions/Session 1.md": "We met [[Mira]] at the docks and crossed with [[Tam]].",
}


def _run(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def mounted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(source, read-only mount of it): an indexed bundle, and the same folder where nothing can be written."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    root = tmp_path_factory.mktemp("readonly")
    source = indexed_bundle(root, NOTES)
    mount = root / "mnt" / "bundle"
    mount.mkdir(parents=True)
    if subprocess.run(["mount", "--bind", str(source), str(mount)], capture_output=True).returncode != 0:
        pytest.skip("this machine does not allow bind mounts")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(mount)], capture_output=True).returncode != 0:
            pytest.skip("this machine does not allow a read-only remount")
        assert not os.access(mount, os.W_OK)
        yield source, mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)  # a file still open: detach it now


def test_search_links_and_sql_work_on_a_read_only_bundle(mounted: tuple[Path, Path]) -> None:
    source, mount = mounted
    found = _run("search", mount, "Who runs the ferry?", "--json")
    assert found.returncode == 0, found.stderr
    assert "People/Tam" in {hit["note_id"] for hit in json.loads(found.stdout)["hits"]}
    assert _run("links", mount).returncode == 0
    from retriever.agent.tools import BundleTools

    assert BundleTools(mount).sql("SELECT count(*) AS n FROM concepts")["rows"] == [[3]]


def test_ask_chat_eval_and_the_mcp_tools_work_on_a_read_only_bundle(mounted: tuple[Path, Path], tmp_path: Path) -> None:
    source, mount = mounted
    asked = _run("ask", mount, "Who runs the ferry?", "--llm", "extract", "--json")
    assert asked.returncode == 0, asked.stderr
    assert "People/Tam" in {c["note_id"] for c in json.loads(asked.stdout)["citations"]}
    chat = subprocess.run([str(EXE), "chat", str(mount), "--llm", "extract"], input="Who runs the ferry?\n",
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert chat.returncode == 0 and "Tam runs the ferry" in chat.stdout, chat.stderr
    assert "Traceback" not in chat.stderr
    golden = tmp_path / "g.jsonl"
    golden.write_text(json.dumps({"id": "q1", "tier": "lookup", "question": "Who runs the ferry?",
                                  "gold": ["People/Tam.md"], "answer": "Tam", "answer_entities": ["Tam"]}) + "\n",
                      "utf-8")  # fmt: skip
    evaluated = _run("eval", mount, "--golden", golden, "--out", tmp_path / "reports")
    assert evaluated.returncode == 0, evaluated.stderr
    assert (tmp_path / "reports" / "eval-g.json").is_file()
    nowhere = _run("eval", mount, "--golden", golden)  # the default report folder is inside the bundle
    assert nowhere.returncode == 1 and nowhere.stderr.startswith("Error: ") and "--out" in nowhere.stderr
    assert len(nowhere.stderr.splitlines()) == 1, nowhere.stderr
    import anyio

    from retriever.agent.mcp_server import Library, build_server
    from retriever.agent.tools import BundleTools

    tools = BundleTools(mount)
    assert "People/Tam" in {h["id"] for h in tools.search("Who runs the ferry?")["hits"]}
    assert "ferry" in tools.read_note("Tam")["text"]
    tools.close()
    library = Library([mount])
    uris = {str(r.uri) for r in anyio.run(build_server(library).list_resources)}
    for served in library.tools.values():
        served.close()
    assert "okf://bundle/concepts/People/Tam.md" in uris
    assert not any(source.rglob("*.tmp*")) and not (source / "reports").exists()


def test_index_says_in_one_line_that_the_bundle_is_read_only(mounted: tuple[Path, Path]) -> None:
    source, mount = mounted
    for table in (source / ".vault2okf").glob("table-*.npz"):
        table.unlink()  # so the index has work to do: save the table again
    done = _run("index", mount, "--embedder", "minilm", "--no-progress")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith("Error: ") and "read-only" in done.stderr and len(done.stderr.splitlines()) == 1


def test_a_read_only_bundle_without_its_saved_table_is_one_error_line(mounted: tuple[Path, Path]) -> None:
    source, mount = mounted
    for table in (source / ".vault2okf").glob("table-*.npz"):
        table.unlink()
    done = _run("search", mount, "Who runs the ferry?")
    assert done.returncode == 1 and done.stderr.startswith("Error: ") and "read-only" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
