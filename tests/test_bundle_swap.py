"""The bundle lock, the swap into place, the leftovers of a killed run, and files vault2okf did not write."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from retriever.errors import RetrieverError
from retriever.index import index_bundle
from vault2okf import bundle as b
from vault2okf.cli import app
from vault2okf.convert import convert
from vault2okf.errors import Vault2OkfError

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"
VAULT = VAULTS / "children-of-ash"
CLI = Path(sys.executable).parent / "vault2okf"
runner = CliRunner()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not VAULT.is_dir():
        pytest.skip(f"{VAULT} not present")
    out = tmp_path_factory.mktemp("template") / "bundle"
    convert(VAULT, out)
    return out


@pytest.fixture
def bundle(template: Path, tmp_path: Path) -> Path:
    """A converted bundle with a stand-in retriever state (a file per kind of entry the retriever keeps)."""
    out = tmp_path / "bundle"
    shutil.copytree(template, out)
    (out / b.STATE / "chroma").mkdir()
    (out / b.STATE / "chroma" / "chroma.sqlite3").write_bytes(b"index")
    (out / b.STATE / "index.json").write_text("{}", "utf-8")
    return out


def usable(out: Path) -> bool:
    """The OKF tree, a database that opens, the link-health report, a vault2okf marker."""
    with duckdb.connect(str(out / "okf.duckdb"), read_only=True) as con:
        concepts = con.execute("SELECT count(*) FROM concepts").fetchone()[0]
    tree = (out / "concepts" / "index.md").is_file()
    return tree and concepts > 0 and (out / "link-health.json").is_file() and b.read_marker(out) is not None


def state_kept(out: Path) -> bool:
    return (out / b.STATE / "chroma" / "chroma.sqlite3").read_bytes() == b"index"


def siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name != out.name)


# --- the lock ---------------------------------------------------------------------------------------------


def test_convert_fails_at_once_while_another_run_holds_the_bundle(bundle: Path) -> None:
    held = rf"another vault2okf is indexing {bundle} \(pid {os.getpid()}\)"
    with b.bundle_lock(bundle, "indexing"), pytest.raises(Vault2OkfError, match=held):
        convert(VAULT, bundle)
    assert usable(bundle) and state_kept(bundle)
    convert(VAULT, bundle)  # released: the next run goes ahead
    assert usable(bundle) and state_kept(bundle)


def test_index_fails_at_once_while_a_convert_holds_the_bundle(bundle: Path) -> None:
    held = rf"another vault2okf is converting {bundle} \(pid \d+\)"
    with b.bundle_lock(bundle, "converting"), pytest.raises(RetrieverError, match=held):
        index_bundle(bundle, embedder_name="minilm", progress=False)


def test_the_lock_file_sits_beside_the_bundle_and_is_removed_on_release(bundle: Path) -> None:
    (bundle.parent / ".bundle.lock").write_text("99999999 indexing, killed\n")  # left by a killed run: not held
    with b.bundle_lock(bundle, "converting"):
        assert (bundle.parent / ".bundle.lock").read_text() == f"{os.getpid()} converting\n"
    assert not (bundle.parent / ".bundle.lock").exists()  # removed while still held, so no run takes a stale one


def test_two_converts_at_once_one_refused_clearly_bundle_and_index_survive(bundle: Path) -> None:
    outcomes = []
    for _ in range(3):
        runs = [subprocess.Popen([CLI, "convert", VAULT, "-o", bundle], stderr=subprocess.PIPE) for _ in range(2)]
        for run in runs:
            _, err = run.communicate(timeout=120)
            outcomes.append(run.returncode)
            assert run.returncode == 0 or b"another vault2okf is converting" in err, err.decode()
        assert usable(bundle) and state_kept(bundle)
    assert siblings(bundle) == []
    assert 0 in outcomes


# --- the swap ---------------------------------------------------------------------------------------------


WATCH = """
import os, sys
skill, stop, misses = sys.argv[1], sys.argv[2], 0
print("watching", flush=True)
while not os.path.exists(stop):
    misses += not os.path.isfile(skill)
print(misses, flush=True)
"""


def test_the_bundle_path_is_never_missing_during_swaps(bundle: Path, tmp_path: Path) -> None:
    stop = tmp_path / "stop"  # the watcher is a process of its own: it looks while the swaps run, not between
    args = [sys.executable, "-c", WATCH, str(bundle / "SKILL.md"), str(stop)]
    watcher = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert watcher.stdout is not None and watcher.stdout.readline() == "watching\n"
    try:
        for _ in range(50):  # with two renames instead of one exchange the watcher saw the gap 5,232 times
            stage = b.staging_dir(bundle)
            shutil.copytree(bundle, stage, dirs_exist_ok=True, ignore=shutil.ignore_patterns("chroma", "index.json"))
            b.swap_into_place(stage, bundle)
    finally:
        stop.touch()
        misses = watcher.communicate(timeout=60)[0]
        stop.unlink()
    assert misses == "0\n" and usable(bundle) and state_kept(bundle) and siblings(bundle) == []


def test_reconvert_keeps_the_index_and_leaves_only_the_lock_beside(bundle: Path) -> None:
    convert(VAULT, bundle)
    assert usable(bundle) and state_kept(bundle) and siblings(bundle) == []


# --- what a killed run leaves, finished by the next run -----------------------------------------------------


def test_killed_after_the_exchange_the_index_moves_back(bundle: Path, template: Path) -> None:
    old = bundle.parent / ".bundle.tmp-4242"  # the exchange happened: the old bundle (with the index) is here
    bundle.rename(old)
    shutil.copytree(template, bundle)
    (old / b.STATE / "index.json").rename(bundle / b.STATE / "index.json")  # one entry had already moved
    convert(VAULT, bundle)
    assert usable(bundle) and state_kept(bundle) and (bundle / b.STATE / "index.json").is_file()
    assert siblings(bundle) == []


def test_killed_between_two_renames_the_old_bundle_is_put_back(bundle: Path) -> None:
    bundle.rename(bundle.parent / ".bundle.old-4242")  # where folders cannot be exchanged, the gap
    b.recover(bundle)
    assert usable(bundle) and state_kept(bundle) and siblings(bundle) == []


def test_a_half_written_stage_is_removed_and_user_folders_alike_are_not(bundle: Path) -> None:
    (bundle.parent / ".bundle.tmp-77" / "concepts").mkdir(parents=True)
    (bundle.parent / ".bundle.tmp-notes").mkdir()
    removed = b.recover(bundle)
    assert [p.name for p in removed] == [".bundle.tmp-77"]
    assert siblings(bundle) == [".bundle.tmp-notes"] and usable(bundle) and state_kept(bundle)


# --- files vault2okf did not write ---------------------------------------------------------------------------


def test_files_a_user_added_are_listed_and_kept(bundle: Path) -> None:
    (bundle / "my notes.txt").write_text("mine", "utf-8")
    (bundle / "concepts" / "Extra.md").write_text("# mine\n", "utf-8")
    (bundle / "concepts" / "link").symlink_to(bundle / "SKILL.md")
    with pytest.raises(Vault2OkfError) as caught:
        convert(VAULT, bundle)
    message = str(caught.value)
    assert "3 file(s) that vault2okf did not write" in message and "--force" in message
    assert "concepts/Extra.md, concepts/link, my notes.txt." in message
    assert (bundle / "my notes.txt").read_text("utf-8") == "mine"


def test_force_replaces_them_and_keeps_the_index(bundle: Path) -> None:
    (bundle / "my notes.txt").write_text("mine", "utf-8")
    result = runner.invoke(app, ["convert", str(VAULT), "-o", str(bundle)])
    assert result.exit_code != 0 and "my notes.txt" in result.output and (bundle / "my notes.txt").exists()
    result = runner.invoke(app, ["convert", str(VAULT), "-o", str(bundle), "--force"])
    assert result.exit_code == 0, result.output
    assert not (bundle / "my notes.txt").exists() and usable(bundle) and state_kept(bundle)


def test_many_foreign_files_are_counted_and_the_first_ones_named(bundle: Path) -> None:
    for i in range(25):
        (bundle / f"extra-{i:02}.txt").write_text("x", "utf-8")
    with pytest.raises(Vault2OkfError, match=r"25 file\(s\).*extra-00\.txt.*extra-09\.txt.* and 15 more"):
        convert(VAULT, bundle)


def test_the_listing_a_convert_saves_spares_the_next_its_scan_yet_no_foreign_file_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A convert saves its bundle's folders (``bundle.save_listing``): the next one, a fresh process, checks them
    instead of listing every file. A file added in a folder deep in the bundle is still found, and a listing that
    is damaged, or not the bundle's own (the marker written since), is never trusted: the bundle is listed."""
    vault, out = tmp_path / "vault", tmp_path / "bundle"
    shutil.copytree(VAULT, vault)
    convert(vault, out)
    listed: list[Path] = []
    real = b.tree_files
    monkeypatch.setattr(b, "tree_files", lambda root: listed.append(root) or real(root))
    note = sorted(vault.rglob("*.md"))[0]
    note.write_text(note.read_text("utf-8") + "\nA line.\n", "utf-8")
    convert(vault, out)
    assert listed == [] and b.read_listing(out) is not None
    deep = max((p for p in (out / "concepts").rglob("*") if p.is_dir()), key=lambda p: len(p.parts))
    (deep / "mine.md").write_text("# mine\n", "utf-8")
    with pytest.raises(Vault2OkfError, match="1 file\\(s\\) that vault2okf did not write"):
        convert(vault, out)
    (deep / "mine.md").unlink()
    listed.clear()
    saved = (out / b.LISTING).read_bytes()
    (out / b.LISTING).write_bytes(saved[:-1] + bytes([saved[-1] ^ 1]))  # one bit flipped
    assert b.read_listing(out) is None
    note.write_text(note.read_text("utf-8") + "\nAnother line.\n", "utf-8")
    convert(vault, out)
    assert listed == [out] and b.read_listing(out) is not None
    stale = (out / b.LISTING).read_bytes()
    marker = json.loads((out / b.MARKER).read_text("utf-8"))
    (out / b.MARKER).write_text(json.dumps(marker, ensure_ascii=False) + "\n", "utf-8")  # the same bytes, rewritten
    (out / "concepts" / "mine.md").write_text("# mine\n", "utf-8")
    os.utime(out / "concepts", ns=(b.read_listing(out).folders["concepts"][0],) * 2)  # type: ignore[union-attr]
    assert (out / b.LISTING).read_bytes() == stale
    with pytest.raises(Vault2OkfError, match="concepts/mine.md"):
        convert(vault, out)


def test_a_marker_that_is_not_vault2okfs_is_not_a_bundle(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    (out / b.STATE).mkdir(parents=True)
    (out / b.MARKER).write_text("{}", "utf-8")
    (out / "precious.txt").write_text("keep me", "utf-8")
    for force in (False, True):
        with pytest.raises(Vault2OkfError, match="is not a vault2okf bundle"):
            convert(VAULT, out, force=force)
    assert (out / "precious.txt").read_text("utf-8") == "keep me"


def test_a_bundle_from_before_the_file_list_is_judged_by_its_layout(bundle: Path) -> None:
    marker = json.loads((bundle / b.MARKER).read_text("utf-8"))
    del marker["files"]
    (bundle / b.MARKER).write_text(json.dumps(marker), "utf-8")
    (bundle / "concepts" / "Old extra.md").write_text("x", "utf-8")  # inside the tree: cannot be told apart
    (bundle / "todo.txt").write_text("x", "utf-8")
    with pytest.raises(Vault2OkfError, match=r"1 file\(s\).*todo\.txt"):
        convert(VAULT, bundle)
    (bundle / "todo.txt").unlink()
    convert(VAULT, bundle)
    assert usable(bundle) and state_kept(bundle) and "files" in json.loads((bundle / b.MARKER).read_text("utf-8"))


def test_the_marker_lists_every_file_written(template: Path) -> None:
    files = json.loads((template / b.MARKER).read_text("utf-8"))["files"]
    assert files == b.tree_files(template) and {"SKILL.md", "okf.duckdb", "concepts/index.md"} <= set(files)
    assert b.foreign_files(template, json.loads((template / b.MARKER).read_text("utf-8"))) == []


def test_the_marker_lists_every_file_of_a_convert_that_starts_from_the_cache(tmp_path: Path) -> None:
    """A convert seals its bundle with the files its run wrote (``convert._written``), not the stage listed: after
    an edit, a new attachment, a note deleted and one added, the marker's list is still the bundle listed."""
    vault, out = tmp_path / "vault", tmp_path / "bundle"
    shutil.copytree(VAULT, vault)
    convert(vault, out)
    notes = sorted(vault.rglob("*.md"))
    notes[0].write_text(notes[0].read_text("utf-8") + "\n![[map.png]]\n", "utf-8")
    (notes[0].parent / "map.png").write_bytes(b"\x89PNG\r\n")
    notes[1].unlink()
    (vault / "New folder").mkdir()
    (vault / "New folder" / "New note.md").write_text(f"# New\n\nSee [[{notes[2].stem}]].\n", "utf-8")
    result = convert(vault, out)
    assert 0 < result.reused < result.notes
    files = json.loads((out / b.MARKER).read_text("utf-8"))["files"]
    assert files == b.tree_files(out) and "concepts/New folder/New note.md" in files
    assert any(f.endswith("map.png") for f in files)


def test_index_refuses_while_a_killed_convert_holds_the_index_beside_the_bundle(bundle: Path) -> None:
    old = bundle.parent / ".bundle.tmp-4242"
    old.mkdir()
    (bundle / b.STATE / "index.json").rename(old / "index.json")  # as if killed after moving the rest
    (old / b.STATE).mkdir()
    (old / "index.json").rename(old / b.STATE / "index.json")
    with pytest.raises(RetrieverError, match=r"left the index of .* in .*\.bundle\.tmp-4242: run the convert again"):
        index_bundle(bundle, embedder_name="minilm", progress=False)
    convert(VAULT, bundle)
    assert (bundle / b.STATE / "index.json").is_file() and siblings(bundle) == []


def test_an_edited_generated_file_is_output_not_a_users_file(bundle: Path) -> None:
    (bundle / "SKILL.md").write_text("edited by hand\n", "utf-8")
    convert(VAULT, bundle)
    assert (bundle / "SKILL.md").read_text("utf-8").startswith("---\nname: ") and state_kept(bundle)


def test_a_leftover_holding_an_index_is_kept_while_the_output_is_not_a_bundle(bundle: Path, tmp_path: Path) -> None:
    bundle.rename(tmp_path / ".bundle.tmp-4242")
    (tmp_path / ".bundle.tmp-31" / "concepts").mkdir(parents=True)
    bundle.mkdir()
    (bundle / "mine.txt").write_text("x", "utf-8")
    b.recover(bundle)
    assert siblings(bundle) == [".bundle.tmp-4242"] and state_kept(tmp_path / ".bundle.tmp-4242")


# --- the `convert` command leaves the old generation to a child -------------------------------------------


def test_a_detached_removal_leaves_the_old_generation_to_a_child(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Removal.DETACH`` (the command's): the new bundle is in place, the index moved into it, and the old
    generation is deleted by a child process, never by this one; it is gone soon after."""
    from vault2okf.convert import Removal

    deleted_here: list[str] = []
    rmtree = shutil.rmtree
    monkeypatch.setattr(shutil, "rmtree", lambda path, *a, **k: (deleted_here.append(str(path)), rmtree(path, *a, **k)))
    convert(VAULT, bundle, full=True, removal=Removal.DETACH)
    assert usable(bundle) and state_kept(bundle)
    assert not [p for p in deleted_here if Path(p).name.startswith(f".{bundle.name}.tmp-")], deleted_here
    deadline = time.monotonic() + 60  # a guard against a hang, not a speed check
    while siblings(bundle) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert siblings(bundle) == []


def test_the_console_command_ends_its_process_with_its_output_and_bundle_whole(tmp_path: Path) -> None:
    """The console command (``vault2okf.cli.main``) ends its process without freeing what the convert made
    (``cli.convert._end``): its summary still reaches a pipe whole, it exits 0, the bundle is in place with its
    cache, and the next convert after an edit starts from that cache."""
    vault, out = tmp_path / "vault", tmp_path / "bundle"
    shutil.copytree(VAULT, vault)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # its output buffered, as in a pipe
    lines = []
    for _ in range(2):
        done = subprocess.run([CLI, "convert", vault, "-o", out], capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr
        lines.append(done.stdout)
        note = sorted(vault.rglob("*.md"))[0]
        note.write_text(note.read_text("utf-8") + "\nOne more line.\n", "utf-8")
    assert "all converted" in lines[0] and lines[0].rstrip().endswith("link-health.html"), lines[0]
    assert "1 converted" in lines[1] and lines[1].rstrip().endswith("link-health.html"), lines[1]
    assert usable(out)


def test_a_generation_its_remover_left_is_deleted_by_the_next_run(bundle: Path) -> None:
    """A remover killed half-way leaves ``.NAME.tmp-PID-NS``: the next convert deletes it, the index stays."""
    left = bundle.parent / f".{bundle.name}.tmp-4242-1733000000000000000"
    shutil.copytree(bundle / "concepts", left / "concepts")
    convert(VAULT, bundle, full=True)
    assert usable(bundle) and state_kept(bundle) and siblings(bundle) == []
