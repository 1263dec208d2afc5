"""A full disk during convert or index is one `Error:` line naming the path, the free space and about how much
is needed, and nothing written before is lost (issue 26, point 7). The disk is a small tmpfs, which needs root;
elsewhere the tests skip, saying why."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from vault2okf.protocol.disk import disk_full_message, is_disk_full

VAULT = Path(__file__).resolve().parents[2] / "shared" / "vaults" / "children-of-ash"
EXE = Path(sys.executable).with_name("vault2okf")


def _run(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *map(str, args)], capture_output=True, text=True, timeout=600)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[callable]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a tmpfs of a chosen size needs root and mount(8)")
    mounts: list[Path] = []

    def disk(size: str) -> Path:
        where = tmp_path / f"disk{len(mounts)}"
        where.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]).returncode != 0:
            pytest.skip("this machine does not allow a tmpfs mount")
        mounts.append(where)
        return where

    yield disk
    for where in mounts:
        subprocess.run(["umount", str(where)], capture_output=True)


def _one_error_line(done: subprocess.CompletedProcess[str], where: Path) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: no space left on the device of "), done.stderr
    assert str(where) in lines[0] and " free): " in lines[0] and "needs about " in lines[0]
    return lines[0]


def test_convert_onto_a_full_disk_is_one_line_and_leaves_nothing(small_disk) -> None:
    disk = small_disk("400k")
    _one_error_line(_run("convert", VAULT, "-o", disk / "bundle"), disk / "bundle")
    assert os.listdir(disk) == []  # no half-written staging folder left behind


def test_index_onto_a_full_disk_is_one_line_and_the_bundle_stays(small_disk) -> None:
    disk = small_disk("3m")
    assert _run("convert", VAULT, "-o", disk / "bundle").returncode == 0
    before = sorted(p.name for p in (disk / "bundle" / "concepts").rglob("*.md"))
    _one_error_line(_run("index", disk / "bundle", "--embedder", "minilm", "--no-progress"), disk / "bundle")
    assert sorted(p.name for p in (disk / "bundle" / "concepts").rglob("*.md")) == before
    assert _run("links", disk / "bundle").returncode == 0


def test_disk_full_is_seen_in_a_library_error_chain(tmp_path: Path) -> None:
    try:
        try:
            raise OSError(28, "No space left on device")
        except OSError as inner:
            raise RuntimeError("Error in compaction") from inner
    except RuntimeError as outer:
        assert is_disk_full(outer)
    assert is_disk_full(RuntimeError("database or disk is full"))
    assert not is_disk_full(OSError(13, "Permission denied"))
    message = disk_full_message(tmp_path / "not" / "yet", 3 << 20, "a convert")
    assert f"{tmp_path / 'not' / 'yet'} (" in message and "needs about 3.0 MB" in message


def test_convert_onto_a_mount_point_is_refused_before_any_work(small_disk) -> None:
    """Issue 26, point 8: it failed with Errno 16 at the swap and left `.NAME.tmp-PID` beside it for good."""
    disk = small_disk("20m")
    done = _run("convert", VAULT, "-o", disk)
    assert done.returncode == 1 and done.stderr.startswith("Error: ") and "mount point" in done.stderr
    assert f"-o {disk / 'bundle'}" in done.stderr and os.listdir(disk) == []
    assert not [p for p in disk.parent.iterdir() if ".tmp-" in p.name]
