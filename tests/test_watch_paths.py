"""`watch` told which paths changed (issue 38 part 4): its last walk patched with the paths the file events name is
the whole walk; a patch declines what it cannot know (a folder, a file of a folder the walk did not enter, a
symlink, too many paths) and the walk is made whole; a change no event named is found by the whole walk a watcher
makes once it is idle; a file dropped into the bundle is refused as before, though a watcher no longer lists the
whole bundle while its folders are as it left them (``bundle.Listing``)."""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import pytest
from test_incremental_edits import WATCH_KINDS, _build, _edit, _full_equal

from vault2okf import bundle as b
from vault2okf.convert import Kept, convert
from vault2okf.walk import PATCH_MOST, Walked, walk_vault
from vault2okf.watch import Watcher, walk_filter

EXCLUDE = ("tmp", "Scratch.md")


def snapshot(vault: Path) -> dict[str, tuple[int, ...]]:
    """Every file (its signature) and folder (present) of the vault, hidden folders' contents aside."""
    seen: dict[str, tuple[int, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(vault):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for d in dirnames:
            seen[os.path.join(dirpath, d)] = ()
        for name in filenames:
            info = os.lstat(os.path.join(dirpath, name))
            seen[os.path.join(dirpath, name)] = (info.st_size, info.st_mtime_ns, info.st_ino)
    return seen


def touched(before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]]) -> set[str]:
    """The paths file events would name: each file or folder that came, went or changed."""
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


def small_vault(root: Path) -> Path:
    vault = root / "vault"
    for folder in ("People", "Places", "tmp"):
        (vault / folder).mkdir(parents=True)
    for i in range(6):
        (vault / ("People" if i % 2 else "Places") / f"N{i}.md").write_text(f"# N{i}\n\nSee [[N{i + 1}]].\n", "utf-8")
    (vault / "tmp" / "draft.md").write_text("excluded", "utf-8")
    (vault / ".hidden.md").write_text("hidden", "utf-8")
    (vault / "Places" / "map.png").write_bytes(b"\x89PNG")
    return vault


def random_op(vault: Path, rng: random.Random, step: int) -> None:
    notes = sorted(p for p in (vault / "People").iterdir()) + sorted(p for p in (vault / "Places").iterdir())
    notes = [p for p in notes if p.suffix == ".md" and not p.name.startswith(".")]
    folder = vault / rng.choice(["People", "Places"])
    op = rng.choice(["edit", "add", "delete", "rename", "hidden", "excluded", "attachment"])
    if op == "edit" and notes:
        note = rng.choice(notes)
        note.write_text(note.read_text("utf-8") + f"more {step}\n", "utf-8")
    elif op == "delete" and len(notes) > 2:
        rng.choice(notes).unlink()
    elif op == "rename" and notes:
        rng.choice(notes).rename(folder / f"R{step}.md")
    elif op == "hidden":
        hidden = folder / ".swap.md"
        hidden.unlink() if hidden.exists() else hidden.write_text("x", "utf-8")
    elif op == "excluded":
        scratch = folder / "Scratch.md"
        scratch.unlink() if scratch.exists() else scratch.write_text("x", "utf-8")
    elif op == "attachment":
        (folder / f"pic{step}.png").write_bytes(b"\x89PNG" + bytes([step % 256]))
    else:
        (folder / f"A{step}.md").write_text(f"# A{step}\n\n[[N1]]\n", "utf-8")


def test_a_patched_walk_is_the_whole_walk(tmp_path: Path) -> None:
    rng = random.Random(3840)
    vault = small_vault(tmp_path)
    walked = Walked(vault, EXCLUDE)
    assert walked.walk == walk_vault(vault, EXCLUDE) and walked.exact
    for step in range(60):
        before = snapshot(vault)
        random_op(vault, rng, step)
        patched = walked.patch(touched(before, snapshot(vault)))
        assert patched is not None, step
        assert patched == walk_vault(vault, EXCLUDE), step
    assert any(reason == "hidden file" for _, reason in patched.skipped)
    assert "tmp/draft.md" in patched.excluded


@pytest.mark.parametrize("case", ["new folder", "deleted folder", "excluded folder", "outside", "too many", "link"])
def test_a_patch_declines_what_it_cannot_know(tmp_path: Path, case: str) -> None:
    vault = small_vault(tmp_path)
    walked = Walked(vault, EXCLUDE)
    before = snapshot(vault)
    if case == "new folder":
        (vault / "People" / "Sub").mkdir()
        (vault / "People" / "Sub" / "S.md").write_text("# S\n", "utf-8")
    elif case == "deleted folder":
        shutil.rmtree(vault / "Places")
    elif case == "excluded folder":  # listed from the folder, never from its events
        (vault / "tmp" / "more.md").write_text("x", "utf-8")
    elif case == "link":
        (vault / "People" / "L.md").symlink_to(vault / "People" / "N1.md")
    paths = touched(before, snapshot(vault))
    if case == "outside":
        paths = {str(tmp_path / "elsewhere.md")}
    elif case == "too many":
        paths = {str(vault / "People" / f"X{i}.md") for i in range(PATCH_MOST + 1)}
    assert walked.patch(paths) is None
    assert walked.patch(set()) is None  # spent: the next walk is a whole one
    kept = Kept(events=True, walked=walked, changed=set(paths))
    assert kept.walk(vault.resolve(), EXCLUDE) == walk_vault(vault, EXCLUDE) and not kept.patched
    if case == "link":  # a walk holding a symlink is never patched (its target changes with no event on it)
        assert not kept.walked.exact  # type: ignore[union-attr]
        return
    note = vault / "People" / "N1.md"
    note.write_text("# N1\n\nchanged\n", "utf-8")
    kept.note_changes([str(note)])
    assert kept.walk(vault.resolve(), EXCLUDE) == walk_vault(vault, EXCLUDE) and kept.patched
    kept.note_changes(None)  # a change not known by its paths
    assert kept.walk(vault.resolve(), EXCLUDE) == walk_vault(vault, EXCLUDE) and not kept.patched


def test_the_event_filter_keeps_what_the_walk_names(tmp_path: Path) -> None:
    keep = walk_filter(tmp_path)
    root = tmp_path.resolve()
    assert keep(None, str(root / ".swap.md")) and keep(None, str(root / "People" / ".x.md"))
    assert keep(None, str(root / "tmp" / "draft.md")) and keep(None, str(root / ".md"))
    assert not keep(None, str(root / ".obsidian" / "workspace.json"))
    assert not keep(None, str(root / "People" / ".git" / "HEAD"))
    assert not keep(None, str(root.parent / "elsewhere.md"))


def _watcher(vault: Path, out: Path) -> tuple[Watcher, list[str]]:
    lines: list[str] = []
    w = Watcher(vault, out, echo=lines.append)
    w.start()
    return w, lines


def test_watch_told_the_paths_gives_the_full_convert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The random edits of test_incremental_edits, each rebuilt with the paths its events name: every walk a
    patch, every bundle the full convert's, each generation built in the one before the last (``bundle.Spare``)
    from the second rebuild on, holding every file but those the edits touched."""
    rng = random.Random(3807)
    vault, out = tmp_path / "vault", tmp_path / "inc"
    _build(vault, rng)
    w, lines = _watcher(vault, out)
    taken = spy_recycle(monkeypatch)
    for step, kind in enumerate(rng.sample(WATCH_KINDS, len(WATCH_KINDS))):
        before = snapshot(vault)
        _edit(vault, rng, kind, step)
        paths = touched(before, snapshot(vault))
        assert w.rebuild(len(paths), paths), lines[-1]
        assert w.kept.patched and w.kept.used, kind
        w.kept.settle()
        _full_equal(vault, out, tmp_path, step)
    assert not w.check_walk() and w.rebuilds == len(WATCH_KINDS)  # nothing missed: no rebuild
    assert taken[0] == 0 and all(n > 0 for n in taken[1:]), taken  # the start made the bundle: nothing to keep
    assert sorted(taken)[len(taken) // 2] > len(b.tree_files(out)) // 2, taken  # most of it, as a rule
    spare = w.kept.spare
    assert spare is not None and spare.path.is_dir()
    w.kept.close()
    assert not spare.path.exists() and not list(tmp_path.glob(".inc.tmp*"))


def spy_recycle(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many files each recycled stage held (0: a new stage)."""
    taken: list[int] = []
    recycle = b.recycle

    def counting(out: Path, spare: b.Spare | None) -> tuple[Path, set[str]]:
        stage, present = recycle(out, spare)
        taken.append(len(present))
        return stage, present

    monkeypatch.setattr(b, "recycle", counting)
    return taken


def test_a_kept_generation_touched_or_left_by_a_killed_watcher_is_never_built_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file dropped into the generation kept aside: it is not as sealed, so the next stage is a new one; a
    watcher gone without closing leaves it for the next run, which deletes it (``recover``), as any leftover."""
    rng = random.Random(3811)
    vault, out = tmp_path / "vault", tmp_path / "inc"
    _build(vault, rng)
    w, lines = _watcher(vault, out)
    taken = spy_recycle(monkeypatch)
    note = sorted((vault / "People").glob("*.md"))[0]
    for step in range(3):
        note.write_text(note.read_text("utf-8") + f"Step {step}.\n", "utf-8")
        assert w.rebuild(1, [str(note.resolve())]), lines[-1]
    assert w.kept.spare is not None and taken[-1] > 0
    (w.kept.spare.path / "concepts" / "People" / "stray.md").write_text("x", "utf-8")
    note.write_text(note.read_text("utf-8") + "Again.\n", "utf-8")
    assert w.rebuild(1, [str(note.resolve())]), lines[-1]
    assert taken[-1] == 0  # not recycled: a new stage
    w.kept.settle()
    _full_equal(vault, out, tmp_path, 0)
    assert w.kept.spare is not None and w.kept.spare.path.is_dir()
    convert(vault, out)  # another run, as after a killed watcher: the kept generation is a leftover
    assert not w.kept.spare.path.exists()
    note.write_text(note.read_text("utf-8") + "Once more.\n", "utf-8")
    assert w.rebuild(1, [str(note.resolve())]), lines[-1]
    assert taken[-1] == 0
    w.kept.settle()
    _full_equal(vault, out, tmp_path, 1)


def test_a_change_no_event_named_is_found_once_the_watcher_is_idle(tmp_path: Path) -> None:
    rng = random.Random(3808)
    vault, out = tmp_path / "vault", tmp_path / "inc"
    _build(vault, rng)
    past = time.time_ns() - 60_000_000_000
    for note in vault.rglob("*.md"):  # written a minute ago: not re-read for being written close to a convert
        os.utime(note, ns=(past, past))
    w, lines = _watcher(vault, out)
    before = snapshot(vault)
    _edit(vault, rng, "text", 0)
    for path in touched(before, snapshot(vault)):
        os.utime(path, ns=(past, past))
    assert w.rebuild(0, []) and w.kept.patched  # the event was missed: the walk saw nothing
    assert "no note changed" in lines[-1]
    assert w.check_walk(), lines[-1]
    assert "events were missed" in lines[-2] and " changed " in lines[-1]
    w.kept.settle()
    _full_equal(vault, out, tmp_path, 0)


def test_hidden_and_excluded_files_seen_between_rebuilds_reach_the_next_walk(tmp_path: Path) -> None:
    rng = random.Random(3809)
    vault, out = tmp_path / "vault", tmp_path / "inc"
    _build(vault, rng)
    w, lines = _watcher(vault, out)
    hidden = vault / "People" / ".note.md.swp"
    hidden.write_text("x", "utf-8")
    w.quiet.add(str(hidden.resolve()))  # a burst worth no rebuild alone (``run`` keeps its paths so)
    note = sorted((vault / "Places").glob("*.md"))[0]
    note.write_text(note.read_text("utf-8") + "More.\n", "utf-8")
    assert w.rebuild(1, [str(note.resolve())]) and w.kept.patched, lines[-1]
    assert str(hidden.relative_to(vault)) in (out / "link-health.md").read_text("utf-8")  # the report skips it
    w.kept.settle()
    _full_equal(vault, out, tmp_path, 0)


def test_a_file_dropped_into_the_bundle_is_still_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3810)
    vault, out = tmp_path / "vault", tmp_path / "inc"
    _build(vault, rng)
    w, lines = _watcher(vault, out)
    listed: list[Path] = []
    foreign_files = b.foreign_files

    def counting(bundle: Path, marker: dict[str, object]) -> list[str]:
        listed.append(bundle)
        return foreign_files(bundle, marker)

    monkeypatch.setattr(b, "foreign_files", counting)
    note = sorted((vault / "People").glob("*.md"))[0]
    for step in range(2):
        note.write_text(note.read_text("utf-8") + f"Step {step}.\n", "utf-8")
        assert w.rebuild(1, [str(note.resolve())]), lines[-1]
        assert w.kept.listing is not None
    assert listed == []  # the bundle as the watcher sealed it: not listed
    (out / "concepts" / "People" / "mine.md").write_text("my own notes", "utf-8")
    note.write_text(note.read_text("utf-8") + "Again.\n", "utf-8")
    assert not w.rebuild(1, [str(note.resolve())])
    assert "1 file(s) that vault2okf did not write" in lines[-1] and "concepts/People/mine.md" in lines[-1]
    assert (out / "concepts" / "People" / "mine.md").read_text("utf-8") == "my own notes"


def test_a_listing_sees_a_name_added_to_a_folder_whose_time_was_put_back(tmp_path: Path) -> None:
    """A folder changed close to its listing is listed again each time (its mtime may not tell a later change);
    and a new generation, a changed marker or a changed folder are never the one recorded."""
    vault = small_vault(tmp_path)
    out = tmp_path / "out"
    convert(vault, out)
    files = b.tree_files(out)
    folder = out / "concepts" / "People"
    mtime = time.time_ns()
    os.utime(folder, ns=(mtime, mtime))  # changed just now
    listing = b.listing(out, files)
    assert listing is not None and listing.holds(out)
    assert "concepts/People" in listing.racy
    (folder / "mine.md").write_text("x", "utf-8")
    os.utime(folder, ns=(mtime, mtime))
    assert not listing.holds(out)
    (folder / "mine.md").unlink()
    os.utime(folder, ns=(mtime, mtime))
    assert listing.holds(out)
    marker = out / b.MARKER
    marker.write_text(marker.read_text("utf-8"), "utf-8")
    assert not listing.holds(out)
    listing = b.listing(out, files)
    assert listing is not None and listing.holds(out)
    (vault / "People" / "N1.md").write_text("# N1\n\nchanged\n", "utf-8")
    convert(vault, out)  # another process's convert: a new generation
    assert not listing.holds(out)


def test_a_convert_not_told_its_paths_walks_the_whole_vault(tmp_path: Path) -> None:
    """``Kept`` without ``events`` (a library caller that keeps state but follows no events): every walk whole."""
    vault = small_vault(tmp_path)
    kept = Kept()
    for step in range(2):
        note = vault / "People" / "N1.md"
        note.write_text(f"# N1\n\nchanged {step}\n", "utf-8")
        assert kept.walk(vault.resolve(), EXCLUDE) == walk_vault(vault, EXCLUDE) and not kept.patched
    kept.note_changes([str(vault / "People" / "N3.md")])  # told a path, yet not following events: still whole
    (vault / "People" / "N5.md").write_text("# N5\n\nchanged\n", "utf-8")
    assert kept.walk(vault.resolve(), EXCLUDE) == walk_vault(vault, EXCLUDE) and not kept.patched


def test_a_watchers_marker_lists_the_stage_without_walking_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A watcher seals each generation with the files its run put there (``convert._written``: docs, attachments,
    reports, indexes, the database) instead of walking the stage: over random edits, adds, renames, deletes and
    attachments, the marker's list is the stage walked, and no stage is walked."""
    vault, out = small_vault(tmp_path), tmp_path / "out"
    (vault / "Places" / "N0.md").write_text("# N0\n\n![[map.png]] See [[N1]].\n", "utf-8")  # an attachment used
    w, lines = _watcher(vault, out)
    walked: list[Path] = []
    copied = 0
    real = b.tree_files
    monkeypatch.setattr(b, "tree_files", lambda root: walked.append(root) or real(root))
    rng = random.Random(4141)
    for step in range(14):
        before = snapshot(vault)
        random_op(vault, rng, step)
        paths = touched(before, snapshot(vault))
        assert w.rebuild(len(paths), paths), lines[-1]
        marker = b.read_marker(out)
        assert marker is not None and marker["files"] == real(out), step
        copied += any(f.endswith(".png") for f in marker["files"])
    assert not [root for root in walked if ".tmp-" in root.name], walked
    assert copied  # attachments were among them
    w.kept.close()
