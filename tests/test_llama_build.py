"""The installed llama.cpp never takes the AMX path (llama.cpp issue 20824: a segfault on the first decode of
Q4_K weights on an AMX CPU), and it was built with the switch that keeps it off, wherever this runs.

On a CPU without AMX a native build has no AMX either, so the first test passes there trivially; the second
reads the compiler switches GCC recorded in the library (the Makefile passes -frecord-gcc-switches) and fails
on a build made without the switch, on any CPU. The rule that reads them is checked against the real compiler.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from retriever.answer import llama_check as lc

pytest.importorskip("llama_cpp")


def test_the_installed_llama_cpp_has_no_amx_compiled_in() -> None:
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    assert "CPU :" in info, info  # the CPU backend's line is there to be read
    assert "AMX_INT8 = 1" not in info, f"llama.cpp was built with its AMX path: {info}"
    assert not lc.build().amx


def test_the_installed_llama_cpp_was_built_with_the_amx_switch() -> None:
    found = lc.build()
    assert found.libraries, "no libggml-cpu library found in the llama_cpp package"
    assert found.recorded, (
        f"{found.libraries} carry no compiler switches: llama-cpp-python was not built by `make install` "
        f"(it passes -frecord-gcc-switches). Rebuild: {lc.reinstall_line(found)}"
    )
    assert found.amx_switched_off, f"-mno-amx-int8 is not in effect in {found.libraries}: {lc.reinstall_line(found)}"
    records = [r for lib in found.libraries for r in lc.compiler_records(Path(lib)) if "-march=" in r]
    assert records and all("-mno-amx-int8" in r or lc._knows_no_amx(r) for r in records)


EXPANSION = "GNU C17 12.2.0 -march=sapphirerapids -mavx2 {amx} -mavx512f --param=l1-cache-size=48 -mtune=sapphirerapids"


@pytest.mark.parametrize(
    ("record", "off"),
    [
        (EXPANSION.format(amx="-mamx-int8") + " -O3", False),  # a native build on an AMX CPU
        (EXPANSION.format(amx="-mno-amx-int8") + " -O3", False),  # a native build elsewhere: off, but by chance
        (EXPANSION.format(amx="-mamx-int8") + " -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -O3", True),
        (EXPANSION.format(amx="") + " -mno-amx-int8 -mamx-int8", False),  # switched on again after
        ("clang version 18 -mno-amx-int8 -march=native -O3", True),  # clang: an explicit switch wins anywhere
        ("clang version 18 -march=native -O3", False),
    ],
)
def test_the_rule_that_reads_recorded_switches(record: str, off: bool) -> None:
    assert lc.amx_off(record) is off


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize(
    ("flags", "off"),
    [
        (["-march=native"], False),  # the old default build
        (["-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16", "-march=native"], True),  # the Makefile's order
        (["-march=native", "-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16"], True),
    ],
)
def test_the_rule_against_what_gcc_records(tmp_path: Path, flags: list[str], off: bool) -> None:
    """GCC puts -march=native's expansion before the switches typed, whatever their order on the command line,
    so the Makefile's CMAKE_C_FLAGS (which CMake puts before ggml's -march=native) win."""
    source = tmp_path / "unit.c"
    source.write_text("int unit(void) { return 1; }\n")
    library = tmp_path / "libunit.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", *flags, "-frecord-gcc-switches", str(source), "-o", str(library)],
                   check=True)  # fmt: skip
    records = lc.compiler_records(library)
    assert len(records) == 1 and "-march=" in records[0]
    assert lc.amx_off(records[0]) is off
    macros = subprocess.run(["gcc", *flags, "-dM", "-E", "-"], input="", capture_output=True, text=True).stdout
    assert "__AMX_INT8__" not in macros or not off  # the rule never calls a build safe that defines AMX


def test_a_compiler_too_old_for_amx_needs_no_switch() -> None:
    assert lc._knows_no_amx("GNU C17 10.2.1 -march=skylake-avx512 -mtune=skylake-avx512 -O3")
    assert not lc._knows_no_amx("GNU C17 12.2.0 -march=sapphirerapids -mtune=sapphirerapids -O3")
    assert not lc._knows_no_amx("clang version 18 -march=native")


def test_system_info_is_read_per_instruction_set() -> None:
    info = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 0 | AMX_INT8 = 1 | LLAMAFILE = 1 | REPACK = 1 | "
    features = lc.parse_system_info(info)
    assert features["AVX2"] and not features["AVX512"] and features["AMX_INT8"] and features["REPACK"]


def _build(**features: bool) -> lc.Build:
    return lc.Build("0.3.36", dict(features), False, (), True, True, "")


def test_build_problems_name_what_the_cpu_lacks_and_the_amx_path() -> None:
    assert lc.build_problems(_build(AVX2=True, AVX512=True), frozenset({"avx2", "avx512f"})) == []
    lacking = lc.build_problems(_build(AVX2=True, AVX512=True), frozenset({"avx2"}))
    assert lacking == ["compiled for AVX512, which this CPU lacks"]
    amx = lc.build_problems(_build(AVX512=True, AMX_INT8=True), frozenset({"avx512f", "amx_int8"}))
    assert len(amx) == 1 and "20824" in amx[0]
    assert lc.build_problems(_build(AVX2=True), frozenset({"avx2", "amx_int8"})) == []  # AMX there, not compiled
