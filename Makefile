# Two commands matter: `make run` and `make test`. Both set everything up first, from nothing
# but Python 3.11 and the package registries.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Test workers: one per core; each file's tests stay on one worker (module fixtures start servers),
# and files go out in the suite's order: the slow ones first (tests/conftest.py).
TEST_JOBS ?= auto

.PHONY: setup lock run demo test lint screenshots bench bench-daemon bench-all bench-context bench-store bench-embed bench-search bench-backends bench-api eval clean

# The exact, hashed set from the lock, then Cairn itself on top without resolving anything again.
$(STAMP): pyproject.toml requirements-dev.lock
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements-dev.lock
	$(BIN)/python -m pip install -q -e . --no-deps
	touch $(STAMP)

setup: $(STAMP)

## make lock: regenerate requirements.lock (runtime) and requirements-dev.lock (runtime + dev) from
## pyproject.toml's ranges, for every platform, keeping each locked version that still fits;
## LOCK_ARGS=--upgrade moves everything to the newest versions in range. Then `make setup`.
UV_COMPILE = $(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes --custom-compile-command "make lock" -q
lock: setup
	$(UV_COMPILE) $(LOCK_ARGS) -o requirements.lock
	$(UV_COMPILE) $(LOCK_ARGS) --extra dev -c requirements.lock -o requirements-dev.lock

## make run: a guided tour on a fresh embedded (SQLite) store, then `cairn serve` with the dashboard on
## it (prints the URL and a sign-in token; Ctrl-C stops). CAIRN_DEMO_NO_SERVE=1: the tour only;
## CAIRN_DEMO_HOME=DIR: tour and serve that home (default: a new temporary one); CAIRN_DEMO_PORT=PORT.
run: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

demo: run

## make test: lint, then the whole suite (real SQLite, real subprocesses, no mocks of our own code).
test: setup
	bash scripts/setup_browser.sh
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check src

## make bench: every speed target in one table (Cairn beside its target and LoreKit's CLI), from the
## benches that own each figure; writes bench/out/summary.json and a PNG. Minutes once its stores are
## cached; BENCH_ARGS=--quick uses small stores (bench/README.md).
bench: setup
	$(BIN)/python bench/summary_bench.py $(BENCH_ARGS)

bench-all: bench-store bench-embed bench-search bench-context bench-backends

## make bench-context: context and recall, end to end (daemon warm and cold) and in process, 6 to 1,000,000
## lessons; prints a table, writes bench/out/context.json and a PNG plot. Stores are cached.
bench-context: setup
	$(BIN)/python bench/context_bench.py $(BENCH_ARGS)

## make bench-backends: SQLite and Postgres side by side at 100,000 lessons (import, write, read, search);
## starts a throwaway Postgres itself. BENCH_ARGS="--quick" for 5,000.
bench-backends: setup
	$(BIN)/python bench/backends_bench.py $(BENCH_ARGS)

## make bench-api: the HTTP API and MCP of `cairn serve --http` under load at 60,000 lessons (needs the
## context bench's cached store: make bench first).
bench-api: setup
	$(BIN)/python bench/api_bench.py $(BENCH_ARGS)

## make bench-daemon: every command end to end with and without the daemon, against the targets
## (BENCH_ARGS="--store PATH" copies an existing store, e.g. a 60,000-lesson one; default: 2,000 generated)
bench-daemon: setup
	$(BIN)/python bench/daemon_bench.py $(BENCH_ARGS)

bench-store: setup
	$(BIN)/python bench/store_bench.py

bench-search: setup
	$(BIN)/python bench/search_bench.py

bench-embed: setup
	$(BIN)/python bench/embed_bench.py

## make screenshots: docs/img/dashboard-*.png from the demo store (`make run`'s), in headless chromium.
screenshots: setup
	bash scripts/setup_browser.sh
	$(BIN)/python scripts/dashboard_screenshots.py

eval: setup
	$(BIN)/python evals/run_eval.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache bench/out evals/out
