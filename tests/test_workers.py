"""Per-note work over forked workers (vault2okf/workers.py): the same results in the same order as a loop,
so a convert spread over workers writes the bundle a single process writes, byte for byte and row for row.

Workers are asked for here (``VAULT2OKF_WORKERS=2``, small chunks) so the small test vaults take the parallel
path that a big vault takes; nothing the code under test runs is replaced.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hostile import build_hostile_vault
from test_incremental import bundle_files, table_rows

from vault2okf import workers
from vault2okf.convert import convert

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"
PARENT = os.getpid()


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "CHUNK", 7)  # several chunks even for a short list
    monkeypatch.setenv("VAULT2OKF_WORKERS", "2")  # set by the user: workers even for a short list


def _square_where(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def test_results_in_order_from_other_processes(forced: None) -> None:
    got = workers.parallel_map(_square_where, list(range(100)))
    assert [r for r, _ in got] == [x * x for x in range(100)]
    assert {pid for _, pid in got} - {PARENT}, "no item ran in a worker"


def test_one_worker_means_no_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAULT2OKF_WORKERS", "1")
    assert {pid for _, pid in workers.parallel_map(_square_where, list(range(500)))} == {PARENT}


def test_by_default_a_short_list_is_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VAULT2OKF_WORKERS", raising=False)
    assert {pid for _, pid in workers.parallel_map(_square_where, list(range(workers.MIN_ITEMS - 1)))} == {PARENT}


def _unsendable(x: int) -> object:
    if x == 13 and os.getpid() != PARENT:
        return lambda: x  # a result pickle cannot send back: its chunk is done again in the parent
    return x + 1


def _dies(x: int) -> int:
    if x == 20 and os.getpid() != PARENT:
        os._exit(3)  # a worker killed in the middle of its chunk
    return -x


def test_a_failed_chunk_is_done_again_in_the_parent(forced: None) -> None:
    assert workers.parallel_map(_unsendable, list(range(40))) == [x + 1 for x in range(40)]


def test_a_dead_worker_chunk_is_done_again_in_the_parent(forced: None) -> None:
    assert workers.parallel_map(_dies, list(range(40))) == [-x for x in range(40)]


def test_finish_runs_after_each_chunk_where_it_ran(forced: None, tmp_path: Path) -> None:
    """What ``fn`` leaves for ``finish`` (convert: docs on writer threads) is done before the chunk returns."""
    pending: list[Path] = []

    def fn(x: int) -> int:
        pending.append(tmp_path / f"{x}.txt")
        return x

    def finish() -> None:
        for path in pending:
            path.write_text(str(os.getpid()))
        pending.clear()

    assert workers.parallel_map(fn, list(range(30)), finish) == list(range(30))
    written = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert sorted(written) == sorted(f"{x}.txt" for x in range(30))
    assert set(written.values()) - {str(PARENT)}, "finish never ran in a worker"


@pytest.mark.parametrize("vault", ["hostile", "children-of-ash"])
def test_convert_over_workers_writes_the_single_process_bundle(
    vault: str, forced: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if vault == "hostile":
        source, _ = build_hostile_vault(tmp_path / "src")
    else:
        source = tmp_path / "src" / vault
        shutil.copytree(VAULTS / vault, source)
    parallel = convert(source, tmp_path / "parallel")
    monkeypatch.setenv("VAULT2OKF_WORKERS", "1")
    single = convert(source, tmp_path / "single")
    assert bundle_files(tmp_path / "parallel") == bundle_files(tmp_path / "single")
    assert table_rows(tmp_path / "parallel") == table_rows(tmp_path / "single")
    assert parallel.report.to_json() == single.report.to_json()

    note = sorted(source.rglob("*.md"))[len(list(source.rglob("*.md"))) // 2]
    note.write_bytes(note.read_bytes() + b"\nAn edit: [[Nowhere at all]]\n")
    monkeypatch.setenv("VAULT2OKF_WORKERS", "2")
    shutil.rmtree(tmp_path / "single")
    again = convert(source, tmp_path / "parallel")  # incremental, over workers
    assert again.reused > 0
    monkeypatch.setenv("VAULT2OKF_WORKERS", "1")
    convert(source, tmp_path / "single", full=True)
    assert bundle_files(tmp_path / "parallel") == bundle_files(tmp_path / "single")
    assert table_rows(tmp_path / "parallel") == table_rows(tmp_path / "single")
