"""`vault2okf watch` as a real process on a temp copy of a shared vault: edit, add, rename, delete, a broken
note; the bundle (and with --index the index) follows; SIGINT stops it cleanly; a full convert of the final
vault gives the same bundle. Latencies are printed (run with -s), never asserted."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest

from tests.bundle_checks import database_rows, tree_hashes
from vault2okf.convert import convert
from vault2okf.watch import Changes, diff_notes, vault_filter

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"
ROOT = Path(__file__).resolve().parents[1]
PATIENCE = 180.0  # seconds: generous on a loaded machine; a deadline is a hang detector, not a speed claim


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    source = VAULTS / "children-of-ash"
    if not source.is_dir():
        pytest.skip(f"{source} not present")
    copy = tmp_path / "vault"
    shutil.copytree(source, copy)
    return copy


class Watch:
    """The watcher as a subprocess; its output lines arrive on a queue."""

    def __init__(self, vault: Path, out: Path, *extra: str) -> None:
        code = "from vault2okf.cli import app; app(prog_name='vault2okf')"
        args = [sys.executable, "-c", code, "watch", str(vault), "-o", str(out), "--debounce", "150", *extra]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
        self.proc = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_line(self, text: str) -> str:
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                assert self.proc.poll() is None, f"watch exited {self.proc.returncode}: {self.seen}"
                continue
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"no line with {text!r} in {PATIENCE}s: {self.seen}")

    def drain(self) -> list[str]:
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return self.seen

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=PATIENCE)
        time.sleep(0.2)
        self.drain()
        return code


def until(check: Callable[[], bool], w: Watch | None = None) -> float:
    """Seconds until ``check()`` holds (polling); fails after PATIENCE."""
    started = time.monotonic()
    error: BaseException | None = None
    while time.monotonic() - started < PATIENCE:
        try:
            if check():
                return time.monotonic() - started
        except (OSError, duckdb.Error) as exc:
            error = exc  # between two files of a swap, or a database being read as it is replaced
        time.sleep(0.05)
    seen = w.drain() if w else []
    raise AssertionError(f"the bundle did not follow the vault (last error {error!r}); watch said {seen}")


def bodies(out: Path) -> dict[str, str]:
    with duckdb.connect(str(out / "okf.duckdb"), read_only=True) as con:
        return dict(con.execute("SELECT vault_path, body FROM concepts").fetchall())


def problems(out: Path) -> str:
    return (out / "link-health.md").read_text("utf-8")


@pytest.fixture
def watching(vault: Path, tmp_path: Path) -> Iterator[tuple[Watch, Path]]:
    out = tmp_path / "bundle"
    w = Watch(vault, out)
    try:
        yield w, out
    finally:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait()


def test_the_bundle_follows_edits_adds_renames_and_deletes(
    vault: Path, watching: tuple[Watch, Path], tmp_path: Path
) -> None:
    w, out = watching
    w.wait_line("watching ")
    latency = {}
    note = vault / "NPCs" / "Drex Orin.md"
    assert "Drex Orin.md" not in (vault / "NPCs" / "Argosy Brut.md").read_text("utf-8")

    with note.open("a", encoding="utf-8") as f:
        f.write("\nDrex keeps a copper lantern lit for [[Argosy Brut]].\n")
    latency["edit"] = until(lambda: "copper lantern" in bodies(out).get("NPCs/Drex Orin.md", ""), w)

    (vault / "NPCs" / "Quill Marren.md").write_text("# Quill Marren\n\nA ferryman who owes [[Drex Orin]].\n", "utf-8")
    latency["add"] = until(lambda: "NPCs/Quill Marren.md" in bodies(out), w)
    assert (out / "concepts" / "NPCs" / "Quill Marren.md").is_file()

    (vault / "NPCs" / "Quill Marren.md").rename(vault / "NPCs" / "Quill the Ferryman.md")
    renamed = {"NPCs/Quill the Ferryman.md"}
    latency["rename"] = until(lambda: set(bodies(out)) & {"NPCs/Quill Marren.md", *renamed} == renamed, w)
    assert not (out / "concepts" / "NPCs" / "Quill Marren.md").exists()
    w.wait_line("renamed NPCs/Quill Marren.md -> NPCs/Quill the Ferryman.md")

    (vault / "Broken.md").write_text("---\ntitle: [never closed\n---\nStill a note.\n", "utf-8")
    line = w.wait_line("Broken.md")
    assert "problem in Broken.md: frontmatter" in line  # a broken edit is a report line...
    until(lambda: "Broken.md" in problems(out))  # ...and in the link-health report, converted anyway
    assert "Still a note." in bodies(out)["Broken.md"]

    (vault / "NPCs" / "Quill the Ferryman.md").unlink()
    (vault / "Broken.md").unlink()
    latency["delete"] = until(lambda: not {"NPCs/Quill the Ferryman.md", "Broken.md"} & set(bodies(out)), w)
    assert w.proc.poll() is None  # the broken note never stopped the watcher

    assert w.stop() == 0, w.seen
    assert "stopped after" in w.seen[-1], w.seen
    print("\nwatch latency (s, file change -> bundle shows it):", {k: round(v, 2) for k, v in latency.items()})

    fresh = tmp_path / "fresh"
    convert(vault, fresh)
    assert tree_hashes(out, skip=(".vault2okf", "okf.duckdb")) == tree_hashes(fresh, skip=(".vault2okf", "okf.duckdb"))
    assert database_rows(out) == database_rows(fresh)
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(".bundle.")]  # no lock, no leftovers


def test_a_failed_rebuild_is_a_line_and_the_watch_goes_on(vault: Path, watching: tuple[Watch, Path]) -> None:
    w, out = watching
    w.wait_line("watching ")
    before = bodies(out)
    (vault / "vault2okf.toml").write_text("[links\nbroken toml", "utf-8")
    assert "convert failed, bundle unchanged" in w.wait_line("rebuild ")
    assert bodies(out) == before
    (vault / "vault2okf.toml").unlink()
    (vault / "Later.md").write_text("Written after the bad config was removed.\n", "utf-8")
    until(lambda: "Later.md" in bodies(out), w)
    assert w.stop() == 0


@pytest.mark.slow
def test_watch_index_follows_the_vault(vault: Path, tmp_path: Path) -> None:
    from retriever.index import open_table

    out = tmp_path / "bundle"
    w = Watch(vault, out, "--index", "--embedder", "minilm")
    try:
        w.wait_line("watching ")

        def indexed() -> set[str]:
            _, table, _ = open_table(out)
            return set(table.note_ids)

        assert "NPCs/Drex Orin" in indexed()
        (vault / "NPCs" / "Quill Marren.md").write_text("# Quill\n\nA ferryman on the ash river.\n", "utf-8")
        added = until(lambda: "NPCs/Quill Marren" in indexed(), w)
        line = w.wait_line("added NPCs/Quill Marren.md")
        assert "1 embedded" in line, line  # only the new note's chunk is embedded
        (vault / "NPCs" / "Quill Marren.md").unlink()
        removed = until(lambda: "NPCs/Quill Marren" not in indexed(), w)
        assert "removed" in w.wait_line("removed NPCs/Quill Marren.md")
        print(f"\nwatch --index latency (s): add {added:.2f}, delete {removed:.2f}")
        assert w.stop() == 0
    finally:
        if w.proc.poll() is None:
            w.proc.kill()


def test_diff_notes_names_a_rename_and_an_edit() -> None:
    before = {"a.md": "1", "b.md": "2", "c.md": "3"}
    after = {"a.md": "1x", "z.md": "2", "d.md": "4"}
    assert diff_notes(before, after) == Changes(("d.md",), ("a.md",), ("c.md",), (("b.md", "z.md"),))
    assert not diff_notes(before, before) and diff_notes(before, before).describe() == "no note changed"


def test_the_filter_skips_what_the_walk_skips(tmp_path: Path) -> None:
    keep = vault_filter(tmp_path, ("Templates",))
    assert keep(None, str(tmp_path / "People" / "Bob.md"))
    assert keep(None, str(tmp_path / "vault2okf.toml"))
    assert not keep(None, str(tmp_path / ".obsidian" / "workspace.json"))
    assert not keep(None, str(tmp_path / "Templates" / "Session.md"))
    assert not keep(None, str(tmp_path / "People" / ".Bob.md.swp"))
    assert not keep(None, str(tmp_path.parent / "elsewhere.md"))


def test_bad_options_fail_before_any_work(vault: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from vault2okf.cli import app

    runner = CliRunner()
    out = tmp_path / "bundle"
    bad = runner.invoke(app, ["watch", str(vault), "-o", str(out), "--index", "--embedder", "nope"])
    assert bad.exit_code == 1 and "Error: Unknown embedder 'nope'" in bad.output and not out.exists()
    inside = runner.invoke(app, ["watch", str(vault), "-o", str(vault / "out")])
    assert inside.exit_code == 1 and "inside the vault" in inside.output and "Traceback" not in inside.output
    assert not (vault / "out").exists()
