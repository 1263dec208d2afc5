"""`doctor` and the preflight on a broken install: a damaged llama.cpp library, an old SQLite under Chroma, a model
path that is no GGUF, and a CPU or library that changed since the cached check (issue 39, items 4 and 5).

Nothing in the real venv is touched: a broken copy of the llama_cpp package (a truncated libllama.so, a missing
libggml.so.0) or a stand-in `sqlite3` reporting an old version is put first on the children's PYTHONPATH, and
the checks that load native code run in those children.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from retriever.answer import llama_check as lc
from retriever.answer.contract import AnswerError
from vault2okf import doctor

pytest.importorskip("llama_cpp")
STANDINS = Path(__file__).resolve().parent / "standins"
EXE = Path(sys.executable).with_name("vault2okf")


def _broken_llama(tmp_path: Path, how: str) -> Path:
    """A folder holding a copy of the llama_cpp package with its library broken ``how``; first on PYTHONPATH,
    the children import it instead of the installed one."""
    spec = importlib.util.find_spec("llama_cpp")
    assert spec and spec.origin
    root = tmp_path / how
    package = root / "llama_cpp"
    shutil.copytree(Path(spec.origin).parent, package, ignore=shutil.ignore_patterns("__pycache__", "server"))
    lib = package / "lib"
    if how == "truncated":
        with (lib / "libllama.so").open("r+b") as file:
            file.truncate(200_000)  # the headers promise segments past the end: mapping them is a SIGBUS
    else:
        for path in lib.glob("libggml.so*"):
            path.unlink()
    return root


def _first_on_path(monkeypatch: pytest.MonkeyPatch, folder: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    return {"PYTHONPATH": path}


def test_a_truncated_libllama_is_a_fail_line_in_doctor_not_a_sigbus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**os.environ, **_first_on_path(monkeypatch, _broken_llama(tmp_path, "truncated"))}
    not_gguf = tmp_path / "notes.txt"
    not_gguf.write_text("not a model\n")
    done = subprocess.run(
        [str(EXE), "doctor", "--json", "--model", str(not_gguf)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)  # not -7: no SIGBUS reached us
    assert "Traceback" not in done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["llama.cpp"]["status"] == "fail"
    assert "SIGBUS" in checks["llama.cpp"]["detail"] and "reinstall" in checks["llama.cpp"]["fix"]
    model = checks["model file"]
    assert model["status"] == "fail" and "not a GGUF file" in model["detail"], model
    assert "reinstall" not in (model["fix"] or "")  # the file's fault is not put on the build
    assert checks["chroma"]["status"] == "ok"  # the other checks still ran


def test_a_missing_libggml_is_a_fail_line_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _first_on_path(monkeypatch, _broken_llama(tmp_path, "missing"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    checks = {c.name: c for c in doctor.llama_checks(model)}
    assert checks["llama.cpp"].status == doctor.FAIL
    assert "libggml.so.0" in checks["llama.cpp"].detail and "does not load" in checks["llama.cpp"].detail
    assert checks["llama.cpp"].fix and "--force-reinstall" in checks["llama.cpp"].fix
    assert checks["model file"].status == doctor.OK
    assert checks["local model"].status == doctor.WARN and "not loaded" in checks["local model"].detail


def test_ask_preflight_on_a_truncated_libllama_is_an_error_naming_doctor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _first_on_path(monkeypatch, _broken_llama(tmp_path, "truncated"))
    monkeypatch.setenv(lc.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(lc.PROBE_ENV, raising=False)
    monkeypatch.setattr(lc, "_PASSED", set())
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(AnswerError, match=r"crashed with SIGBUS while loading its library.*llama.cpp build"):
        lc.preflight(model)


def test_chroma_with_an_old_sqlite_is_a_fail_line_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in = tmp_path / "old-sqlite" / "sqlite3"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text('sqlite_version_info = (3, 31, 1)\nsqlite_version = "3.31.1"\n')
    _first_on_path(monkeypatch, stand_in.parent)
    check = doctor.telemetry_check()
    assert check.status == doctor.FAIL, check
    assert "sqlite3 >= 3.35.0" in check.detail and "\x1b" not in check.detail
    assert check.fix == doctor.SQLITE_FIX


def _fifo(tmp_path: Path) -> Path:
    fifo = tmp_path / "model.fifo"
    os.mkfifo(fifo)
    return fifo


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("missing", "does not exist"),
        ("folder", "is a folder"),
        ("fifo", "not a regular file"),
        ("text", "not a GGUF file"),
    ],
)
def test_doctor_model_says_what_is_wrong_with_the_file(tmp_path: Path, kind: str, said: str) -> None:
    paths = {"missing": lambda: tmp_path / "gone.gguf", "folder": lambda: tmp_path, "fifo": lambda: _fifo(tmp_path)}
    text = tmp_path / "readme.gguf"
    text.write_text("# not a model\n")
    path = paths.get(kind, lambda: text)()
    file = doctor.model_check(path)
    assert file.status == doctor.FAIL and said in file.detail, file
    assert file.fix == doctor.MODEL_FIX
    decode = doctor.decode_check(file, "reinstall")
    assert decode.status == doctor.FAIL and "not loaded" in decode.detail and decode.fix is None


def test_a_damaged_gguf_is_put_on_the_file_not_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 4000)  # the magic, then nonsense
    monkeypatch.delenv(lc.PROBE_ENV, raising=False)
    file = doctor.model_check(damaged)
    assert file.status == doctor.OK
    decode = doctor.decode_check(file, "reinstall: pip install ...")
    assert decode.status == doctor.FAIL and "refused the model file" in decode.detail, decode
    assert decode.fix == doctor.MODEL_FIX
    monkeypatch.setenv(lc.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(lc, "_PASSED", set())
    with pytest.raises(AnswerError) as raised:
        lc.preflight(damaged)
    assert "model file is at fault" in str(raised.value) and "llama.cpp build" not in str(raised.value)


def test_doctor_model_on_a_fifo_exits_1_without_waiting(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(EXE), "doctor", "--model", str(_fifo(tmp_path))], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert any(line.startswith("✗ model file: ") and "not a regular file" in line for line in done.stdout.splitlines())


# Item 4: the cached "this build works here" marker is keyed on the CPU's flags and the library files' bytes.


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    count, model = tmp_path / "count", tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv(lc.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(lc.PROBE_ENV, f"{sys.executable} {STANDINS / 'counting_probe.py'}")
    monkeypatch.setenv("PROBE_COUNT", str(count))
    monkeypatch.setattr(lc, "_PASSED", set())
    return model, count


def test_the_same_cpu_name_without_avx512_probes_again(
    counted: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    model, count = counted
    flags = "fpu sse2 avx avx2 fma avx512f avx512bw"
    real = lc._cpuinfo
    monkeypatch.setattr(lc, "_cpuinfo", lambda key: flags if key == "flags" else real(key))
    assert not lc.preflight(model).cached
    lc._PASSED.clear()
    assert lc.preflight(model).cached  # same CPU: the cached marker holds
    flags = "fpu sse2 avx avx2 fma"  # the same name, AVX-512 gone (another host behind the same model name)
    lc._PASSED.clear()
    assert not lc.preflight(model).cached
    assert count.read_text().count("run") == 2


def test_a_library_rewritten_in_place_probes_again(
    counted: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, count = counted
    lib = tmp_path / "other-build"
    lib.mkdir()
    so = lib / "libllama.so"
    so.write_bytes(b"\x7fELF build one")
    monkeypatch.setenv(lc.LIB_PATH_ENV, str(lib))
    assert not lc.preflight(model).cached
    lc._PASSED.clear()
    assert lc.preflight(model).cached
    stamp = so.stat()
    so.write_bytes(b"\x7fELF build two")  # the same size and, below, the same mtime: only the bytes differ
    os.utime(so, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    lc._PASSED.clear()
    assert not lc.preflight(model).cached
    assert count.read_text().count("run") == 2


@pytest.mark.parametrize(
    ("kind", "said"), [("folder", "is a folder"), ("fifo", "not a regular file"), ("text", "not a GGUF")]
)
def test_ask_checks_the_model_file_before_anything_loads(tmp_path: Path, kind: str, said: str) -> None:
    from retriever.answer.llama import resolve_model_path

    text = tmp_path / "notes.gguf"
    text.write_text("# not a model\n")
    path = {"folder": tmp_path, "fifo": _fifo(tmp_path) if kind == "fifo" else text, "text": text}[kind]
    with pytest.raises(AnswerError, match=said) as raised:
        resolve_model_path(path)
    assert "llama.cpp" not in str(raised.value)
