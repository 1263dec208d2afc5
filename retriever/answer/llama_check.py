"""Is the installed llama.cpp safe to run here? Its build, this CPU, and one tiny decode in a child process.

llama.cpp's Intel AMX path segfaults on the first decode of Q4_K weights (ggml-org/llama.cpp issue 20824), and a
crash in native code cannot be caught inside the process that suffers it. So:

- `build()` reads what the installed library was compiled for: `llama_print_system_info()` (the instruction sets
  compiled in) and the compiler switches GCC recorded in `libggml-cpu` (`-frecord-gcc-switches`, which the
  Makefile's build passes), to see whether `-mno-amx-int8` is in effect;
- `probe()` loads a GGUF and decodes a few tokens in a child process, and says how the child ended (a signal
  is named: "llama.cpp crashed with SIGSEGV while decoding");
- `preflight()` runs the probe once per build + model + CPU (the result is cached under the user's cache
  folder) before the local model is loaded in our own process, so `ask`, `chat` and `eval --answers` fail with
  one `Error:` line naming `vault2okf doctor` instead of dying.

`VAULT2OKF_LLAMA_PROBE` names a program to run as the child instead of this module (tests use a stand-in
that kills itself); `VAULT2OKF_LLAMA_CHECK=0` skips the preflight.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import shlex
import signal
import stat
import struct
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any

from retriever.answer.contract import AnswerError

PROBE_ENV = "VAULT2OKF_LLAMA_PROBE"
CHECK_ENV = "VAULT2OKF_LLAMA_CHECK"
CACHE_ENV = "VAULT2OKF_CACHE_DIR"
AMX_SWITCHES = ("-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16")
PROBE_TIMEOUT_S = 300.0
PROBE_TOKENS = 4
# The build the Makefile makes; printed wherever a build has to be replaced.
LLAMA_FLAGS = " ".join((*AMX_SWITCHES, "-frecord-gcc-switches"))
REINSTALL = (
    f"CMAKE_ARGS=\"-DGGML_NATIVE=ON -DCMAKE_C_FLAGS='{LLAMA_FLAGS}' -DCMAKE_CXX_FLAGS='{LLAMA_FLAGS}'\" "
    "pip install --force-reinstall --no-cache-dir --no-deps llama-cpp-python=={version}"
    "   (in a checkout: make install rebuilds it the same way)"
)
# llama_print_system_info's name of an instruction set -> the flag /proc/cpuinfo lists for it.
CPU_FLAGS = {
    "SSE3": "pni", "SSSE3": "ssse3", "AVX": "avx", "AVX2": "avx2", "F16C": "f16c", "FMA": "fma", "BMI2": "bmi2",
    "AVX_VNNI": "avx_vnni", "AVX512": "avx512f", "AVX512_VBMI": "avx512vbmi", "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16", "AMX_INT8": "amx_int8",
}  # fmt: skip


@dataclass(frozen=True)
class Build:
    """What the installed llama.cpp was compiled for."""

    version: str
    features: dict[str, bool]  # instruction set -> compiled in (llama_print_system_info's CPU line)
    gpu_offload: bool  # a GPU backend (Vulkan, CUDA...) is compiled in
    libraries: tuple[str, ...]  # the CPU backend's shared libraries that were read
    recorded: bool  # they carry the compiler switches (-frecord-gcc-switches)
    amx_switched_off: bool  # in every unit compiled for a CPU, -mno-amx-int8 is the switch in effect
    system_info: str = field(repr=False)

    @property
    def amx(self) -> bool:
        return self.features.get("AMX_INT8", False)


class Fault(Enum):
    """Whose fault a failed probe is: the llama.cpp build's, the model file's, or either (a crash while loading)."""

    BUILD = "build"
    MODEL = "model"
    EITHER = "either"


@dataclass(frozen=True)
class Probe:
    """How a child process that loaded the model and decoded a few tokens ended."""

    ok: bool
    message: str  # "decoded 4 tokens in 0.8 s", or what went wrong
    signal: str | None = None  # SIGSEGV, SIGILL... when the child was killed by one
    seconds: float = 0.0
    cached: bool = False
    fault: Fault = Fault.BUILD  # when not ok: what to fix


def cpu_flags() -> frozenset[str]:
    """The instruction-set flags of this CPU (Linux: /proc/cpuinfo; elsewhere empty)."""
    return frozenset(_cpuinfo("flags").split())


def cpu_name() -> str:
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def _cpuinfo(key: str) -> str:
    """The value of ``key`` for the first CPU in /proc/cpuinfo; "" when there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith(key):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return ""


@lru_cache(maxsize=1)
def build() -> Build:
    """Read the installed llama-cpp-python's build (imports llama_cpp: loads its libraries, runs nothing)."""
    try:
        import llama_cpp
    except ImportError as error:
        raise AnswerError("llama-cpp-python is not installed — pip install 'vault2okf[ask]'") from error
    except (OSError, RuntimeError) as error:  # the library failed to load (a missing libggml.so.0, a bad file)
        raise AnswerError(f"llama-cpp-python's library does not load: {_one_line(error)}") from error
    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    libraries = _cpu_libraries(Path(llama_cpp.__file__).parent)
    records = [record for lib in libraries for record in compiler_records(lib)]
    return Build(
        version=getattr(llama_cpp, "__version__", "?"),
        features=parse_system_info(info),
        gpu_offload=bool(llama_cpp.llama_supports_gpu_offload()),
        libraries=tuple(str(lib) for lib in libraries),
        recorded=bool(records),
        amx_switched_off=bool(records) and all(amx_off(r) or _knows_no_amx(r) for r in records if _for_a_cpu(r)),
        system_info=info,
    )


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def build_isolated(timeout: float = 120.0) -> Build:
    """`build()` read in a child process: a library that cannot load (a missing libggml.so.0) or kills whoever
    loads it (a truncated libllama.so: SIGBUS) is an AnswerError saying how, never a crash of this process."""
    command = [sys.executable, "-m", __name__, "--build"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as error:
        raise AnswerError(f"loading llama-cpp-python's library did not finish in {timeout:.0f} s") from error
    except OSError as error:
        raise AnswerError(f"could not start the check of llama-cpp-python's library: {error}") from error
    if done.returncode < 0:
        raise AnswerError(
            f"loading llama-cpp-python's library killed the process with {_signal_name(-done.returncode)} "
            "(a damaged or truncated library file)"
        )
    if done.returncode != 0:
        raise AnswerError(_last_line(done.stderr) or f"the library check ended with exit status {done.returncode}")
    try:
        data = json.loads(done.stdout.strip().splitlines()[-1])
        data["libraries"] = tuple(data["libraries"])
        return Build(**data)
    except (IndexError, KeyError, TypeError, ValueError) as error:
        raise AnswerError(f"the library check printed no result: {done.stdout.strip()[-200:]!r}") from error


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _build_child() -> int:
    """Run in the child: print build() as JSON, or its error as one line on stderr (exit 3)."""
    try:
        found = build()
    except AnswerError as error:
        print(str(error), file=sys.stderr)
        return 3
    print(json.dumps(asdict(found)), flush=True)
    return 0


def parse_system_info(info: str) -> dict[str, bool]:
    """``CPU : SSE3 = 1 | AVX = 1 | ... |`` -> {"SSE3": True, "AVX": True, ...} (the CPU backend's part)."""
    features: dict[str, bool] = {}
    for part in info.split("|"):
        name, eq, value = part.rpartition("=")
        name = name.split(":")[-1].strip()
        if eq and name and value.strip().isdigit():
            features.setdefault(name, value.strip() != "0")
    return features


def _cpu_libraries(package: Path) -> list[Path]:
    found = [*package.glob("lib/libggml-cpu*.so*"), *package.glob("lib/libggml-cpu*.dylib")]
    found = found or list(package.glob("lib/libggml*.so*"))  # a build with the CPU backend inside libggml
    return sorted({p.resolve() for p in found})  # each file once, not once per symlink


def compiler_records(library: Path) -> list[str]:
    """The strings of an ELF file's `.GCC.command.line` section (one per distinct compile command), or []."""
    try:
        data = library.read_bytes()
    except OSError:
        return []
    if data[:4] != b"\x7fELF" or data[4] != 2:  # 64-bit ELF only
        return []
    end = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(end + "Q", data, 0x28)  # fmt: skip
    shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)

    def section(i: int) -> tuple[int, int, int]:
        name, _type, _flags, _addr, offset, size = struct.unpack_from(end + "IIQQQQ", data, shoff + i * shentsize)
        return name, offset, size

    try:
        _, names_at, names_size = section(shstrndx)
        names = data[names_at : names_at + names_size]
        for i in range(shnum):
            name_at, offset, size = section(i)
            if names[name_at:].split(b"\0", 1)[0] == b".GCC.command.line":
                text = data[offset : offset + size].decode("utf-8", "replace")
                return [s for s in text.split("\0") if s.strip()]
    except struct.error:
        return []
    return []


def _for_a_cpu(record: str) -> bool:
    return any(t.startswith(("-march=", '"-march=')) for t in record.split())


def _knows_no_amx(record: str) -> bool:
    """A GCC older than 11 cannot emit AMX (nor take the switches): its build is safe without them."""
    words = record.split()
    if len(words) < 3 or words[0] != "GNU" or not words[2][:1].isdigit():
        return False
    return int(words[2].split(".")[0]) < 11


def amx_off(record: str) -> bool:
    """Whether one recorded compile command leaves AMX-INT8 off by an explicit switch.

    GCC records its options with ``-march=native`` already expanded, the CPU's own features first and ending at
    ``-mtune=``; an explicit ``-mno-amx-int8`` comes after that, so an expansion's ``-mno-amx-int8`` (a CPU
    without AMX) does not count: only a switch given on purpose does. Clang records the command line as typed,
    where an explicit feature switch wins over ``-march`` wherever it stands."""
    tokens = [t.strip('"') for t in record.split()]
    amx = [i for i, t in enumerate(tokens) if t in ("-mamx-int8", "-mno-amx-int8")]
    if not amx or tokens[amx[-1]] != "-mno-amx-int8":
        return False
    if not record.startswith("GNU "):
        return True
    expansion_end = max((i for i, t in enumerate(tokens) if t.startswith(("-mtune=", "-march="))), default=-1)
    return amx[-1] > expansion_end


def build_problems(found: Build, flags: frozenset[str]) -> list[str]:
    """What is wrong with this build on this CPU (empty: nothing): instruction sets compiled in that the CPU
    lacks (an illegal instruction waiting to happen), or the AMX path on a CPU that has AMX (issue 20824)."""
    if not flags:
        return []
    missing = [name for name, cpu in CPU_FLAGS.items() if found.features.get(name) and cpu not in flags]
    problems = [f"compiled for {', '.join(missing)}, which this CPU lacks"] if missing else []
    if found.amx and "amx_int8" in flags:
        problems.append("compiled with llama.cpp's AMX path, which crashes on this CPU (llama.cpp issue 20824)")
    return problems


def reinstall_line(found: Build | None = None) -> str:
    version = found.version if found else _installed_version()
    return REINSTALL.format(version=version)


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return "0.3.36"


# The child process.


def probe(model: Path, *, n_gpu_layers: int = 0, timeout: float = PROBE_TIMEOUT_S) -> Probe:
    """Load ``model`` and decode a few tokens in a child process; how it ended, never a crash of ours. The child
    prints the stage it enters ({"stage": "load"}, then "decode"), so a failure is put on the model file or on
    the build: a model llama.cpp refuses is the file's fault, a crash while decoding is the build's."""
    custom = os.environ.get(PROBE_ENV)
    command = shlex.split(custom) if custom else [sys.executable, "-m", __name__]
    command += [str(model), str(n_gpu_layers)]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Probe(False, f"llama.cpp did not finish a {PROBE_TOKENS}-token decode in {timeout:.0f} s", None, timeout)
    except OSError as error:
        return Probe(False, f"could not start the check: {error}")
    seconds = time.perf_counter() - start
    stage, tokens = _read_child(done.stdout)
    loading = stage == "load"
    doing = {"library": "loading its library", "load": "loading the model"}.get(stage or "", "decoding")
    if done.returncode < 0:
        name = _signal_name(-done.returncode)
        fault = Fault.EITHER if loading else Fault.BUILD
        return Probe(False, f"llama.cpp crashed with {name} while {doing}", name, seconds, fault=fault)
    if done.returncode == MODEL_REFUSED:
        last = _last_line(done.stderr) or "no reason given"
        return Probe(False, f"llama.cpp refused the model file: {last}", None, seconds, fault=Fault.MODEL)
    if done.returncode != 0:
        last = _last_line(done.stderr) or f"exit status {done.returncode}"
        return Probe(False, f"llama.cpp failed while {doing}: {last}", None, seconds)
    if tokens is None:
        return Probe(False, f"the check printed no result: {done.stdout.strip()[-200:]!r}", None, seconds)
    return Probe(True, f"decoded {tokens} tokens in {seconds:.1f} s", None, seconds)


MODEL_REFUSED = 2  # the child's exit status when the model file is not one llama.cpp loads


def _read_child(stdout: str) -> tuple[str | None, int | None]:
    """The last stage the child announced and the tokens it decoded (None: not reached)."""
    stage, tokens = None, None
    for line in stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            stage = record.get("stage", stage)
            tokens = record.get("tokens", tokens)
    return stage, tokens if isinstance(tokens, int) else None


GGUF_MAGIC = b"GGUF"


def model_file_problem(path: Path) -> str | None:
    """What keeps ``path`` from being a GGUF model, found without loading it (None: nothing): it must exist, be a
    regular file (not a folder, a FIFO or a device: opening a FIFO would wait forever) and start with GGUF."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return f"the model file {path} does not exist"
    except OSError as error:
        return f"the model file {path} cannot be read: {error.strerror}"
    if stat.S_ISDIR(st.st_mode):
        return f"the model path {path} is a folder, not a GGUF file"
    if not stat.S_ISREG(st.st_mode):
        return f"the model path {path} is not a regular file (a FIFO, a socket or a device)"
    try:
        with path.open("rb") as file:
            head = file.read(len(GGUF_MAGIC))
    except OSError as error:
        return f"the model file {path} cannot be read: {error.strerror}"
    if head != GGUF_MAGIC:
        return f"{path} is not a GGUF file (it starts with {head!r}, a GGUF file with {GGUF_MAGIC!r})"
    return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _child(model: str, n_gpu_layers: int) -> int:
    """Run in the child: check and load the model, decode PROBE_TOKENS tokens, print {"tokens": n}; each stage is
    announced first ({"stage": ...}) so a crash is placed. A model llama.cpp refuses exits with MODEL_REFUSED."""
    problem = model_file_problem(Path(model))
    if problem:
        print(problem, file=sys.stderr)
        return MODEL_REFUSED
    _announce("library")
    from llama_cpp import Llama

    _announce("load")

    devnull = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(2)
    os.dup2(devnull, 2)  # llama.cpp's load log; a crash still ends the process with its signal
    try:
        try:
            llm = Llama(model_path=model, n_ctx=256, n_batch=64, n_gpu_layers=n_gpu_layers, verbose=False)
        except ValueError as error:  # llama-cpp-python's "Failed to load model from file"
            os.dup2(saved, 2)
            print(
                f"{_one_line(error)} — the file is damaged or of a kind this llama.cpp does not read", file=sys.stderr
            )
            return MODEL_REFUSED
        _announce("decode")
        out: Any = llm.create_completion("The capital of France is", max_tokens=PROBE_TOKENS, temperature=0.0)
    finally:
        os.dup2(saved, 2)
    print(json.dumps({"tokens": out["usage"]["completion_tokens"]}), flush=True)
    return 0


def _announce(stage: str) -> None:
    print(json.dumps({"stage": stage}), flush=True)


# The preflight of every command that loads the local model.


def preflight(model: Path, *, n_gpu_layers: int = 0) -> Probe:
    """Probe once per build + model + CPU (cached); a failure is an AnswerError that says whose fault it is (the
    model file's, the build's) and names `vault2okf doctor`."""
    if os.environ.get(CHECK_ENV, "1").strip() == "0":
        return Probe(True, f"skipped ({CHECK_ENV}=0)")
    problem = model_file_problem(model)
    if problem:
        raise AnswerError(f"{problem} — check --model or $VAULT2OKF_GGUF")
    key = cache_key(model, n_gpu_layers)
    if key in _PASSED:
        return Probe(True, "checked in this process", cached=True)
    marker = cache_dir() / f"{key}.json"
    if marker.is_file():
        _PASSED.add(key)
        return Probe(True, "checked before on this machine", cached=True)
    result = probe(model, n_gpu_layers=n_gpu_layers)
    if not result.ok:
        raise AnswerError(f"{result.message} ({model.name}); {BLAME[result.fault]}")
    _remember(marker, result)
    _PASSED.add(key)
    return result


BLAME = {
    Fault.BUILD: "the local model cannot run with this llama.cpp build — run `vault2okf doctor` for the cause and "
    "the fix",
    Fault.MODEL: "the model file is at fault, not llama.cpp: download it again or pass another --model",
    Fault.EITHER: "a damaged model file or a llama.cpp build that cannot run here — run `vault2okf doctor --model "
    "PATH` to tell which",
}


_PASSED: set[str] = set()


def cache_dir() -> Path:
    """$VAULT2OKF_CACHE_DIR/llama-check, else the user's cache folder ($XDG_CACHE_HOME or ~/.cache)/vault2okf."""
    own = os.environ.get(CACHE_ENV)
    base = Path(own) if own else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vault2okf"
    return base / "llama-check"


def cache_key(model: Path, n_gpu_layers: int) -> str:
    """Changes when llama-cpp-python is rebuilt or replaced (its library files are hashed: 24 MB, ~0.1 s), the
    model file changes (its size, mtime and inode: hashing 250 MB+ on every ask would cost seconds), or the CPU
    does (its name and its instruction-set flags: the same name without AVX-512 is another CPU to a build).
    Found without importing llama_cpp: a damaged library must not take this process down before the probe."""
    parts = [sys.version, platform.machine(), cpu_name(), " ".join(sorted(cpu_flags())), str(n_gpu_layers != 0)]
    parts += [os.environ.get(PROBE_ENV, ""), os.environ.get(LIB_PATH_ENV, "")]
    parts += [_digest(p) for p in library_files()] or ["no llama_cpp"]
    parts.append(_stamp(model))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


LIB_PATH_ENV = "LLAMA_CPP_LIB_PATH"  # llama-cpp-python's own: where it loads libllama from instead of its lib/


def library_files() -> list[Path]:
    """The shared libraries llama-cpp-python would load (its package's lib/, and $LLAMA_CPP_LIB_PATH), each once."""
    folders = []
    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        spec = None
    if spec and spec.origin:
        folders.append(Path(spec.origin).parent / "lib")
    if os.environ.get(LIB_PATH_ENV):
        folders.append(Path(os.environ[LIB_PATH_ENV]))
    found = {p.resolve() for folder in folders for p in folder.glob("*") if p.is_file()}
    return sorted(found)


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as file:
            while block := file.read(1 << 20):
                digest.update(block)
    except OSError:
        return f"{path} unreadable"
    return f"{path} {digest.hexdigest()}"


def _stamp(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path} missing"
    return f"{path.resolve()} {st.st_size} {st.st_mtime_ns} {st.st_ino}"


def _remember(marker: Path, result: Probe) -> None:
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        tmp = marker.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps({**asdict(result), "fault": result.fault.value}))
        os.replace(tmp, marker)
    except OSError:
        pass  # an unwritable cache only means the check runs again next time


if __name__ == "__main__":
    if sys.argv[1:] == ["--build"]:
        raise SystemExit(_build_child())
    raise SystemExit(_child(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0))
