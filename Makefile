# Berth — the two commands are `make run` and `make test` (see README.md).
SHELL := /bin/bash
# The interpreter .venv is built on: scripts/pick_python.py says which and why
# (python3 scripts/pick_python.py --why); make install PYTHON=... chooses.
PYTHON ?= $(shell python3 scripts/pick_python.py || echo python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test check pytest pytest-pure-engine install migrate seed worker beat fmt clean compose-config mutation

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || { \
	  python="$(PYTHON)"; \
	  "$$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Berth needs Python 3.11 or newer; found " + sys.version.split()[0])' && \
	  echo "==> creating $(VENV) on $$python" && "$$python" -m venv $(VENV); }
	@echo "==> installing Berth and its tools into $(VENV) (first run takes a minute)"
	@$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	@$(PY) -m pip install --quiet --disable-pip-version-check --progress-bar off -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

# The engine's replay path compiled with mypyc (scripts/build_engine.py): it
# falls back to pure Python, with the same answers, if it cannot be built.
ENGINE_BUILD := queues/engine/native.json
$(ENGINE_BUILD): $(STAMP) $(wildcard queues/*.py queues/engine/*.py) scripts/build_engine.py
	@$(PY) scripts/build_engine.py

install: $(STAMP) $(ENGINE_BUILD)

migrate: install
	@$(PY) manage.py migrate --noinput

seed: migrate
	@$(PY) manage.py seed_demo

## make run: embedded Berth (SQLite, in-process tasks, simulated cluster) on http://$(HOST):$(PORT)
run: seed
	@echo "==> Berth is serving on http://$(HOST):$(PORT)/  (sign in with a demo login above; Ctrl-C stops)"
	@BERTH_PUBLIC_URL="$${BERTH_PUBLIC_URL:-http://$(HOST):$(PORT)}" $(PY) manage.py run_embedded $(HOST):$(PORT)

## make test: quality gates, then the whole suite on real PostgreSQL and Redis
## (and Debian's chromium for the browser tests, installed when missing)
test: install
	@$(PY) scripts/ensure_browser.py
	@$(PY) scripts/test_services.py -- $(MAKE) --no-print-directory check pytest pytest-pure-engine

check: $(STAMP)
	@echo "==> ruff"
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@echo "==> mypy"
	@$(VENV)/bin/mypy .
	@echo "==> import contracts"
	@$(VENV)/bin/lint-imports
	@echo "==> migrations are up to date"
	@$(PY) manage.py makemigrations --check --dry-run > /dev/null || { echo "models changed without a migration: run $(PY) manage.py makemigrations"; exit 1; }
	@echo "==> docker-compose.yml"
	@$(PY) scripts/compose_config.py docker-compose.yml

pytest: $(STAMP)
	@echo "==> pytest (PostgreSQL: $${DATABASE_URL:-unset}, Redis: $${REDIS_URL:-unset})"
	@$(VENV)/bin/pytest $(PYTEST_ARGS)

# The suite above runs the compiled engine where it was built; the container
# image runs it as pure Python, so the engine's own tests run that way too.
# The agreement test already compared the two; a run of chosen tests skips this.
PURE_AGREEMENT := tests/engine/test_compiled_engine.py::test_the_compiled_engine_answers_as_the_pure_one
pytest-pure-engine: $(STAMP)
	@if [ -n "$(PYTEST_ARGS)" ]; then exit 0; fi; \
	if $(PY) -c 'import sys, queues.engine as e; sys.exit(0 if e.ENGINE.compiled else 1)'; then \
	  echo "==> pytest tests/engine tests/kueue again, with the engine as pure Python"; \
	  BERTH_PURE_ENGINE=1 $(VENV)/bin/pytest -q tests/engine tests/kueue --deselect $(PURE_AGREEMENT); \
	else echo "==> (the engine ran as pure Python above: no second pass)"; fi

## make mutation [TARGETS="plan preemption"]: mutmut over the decision, preemption, plan and
## submission rules (docs/mutation.md); slow, so not part of `make test`
mutation: $(STAMP)
	@$(PY) scripts/test_services.py -- $(PY) scripts/mutation.py $(TARGETS)

worker: $(STAMP)
	@$(VENV)/bin/celery -A controlplane worker --loglevel=info --pool=solo

beat: $(STAMP)
	@$(VENV)/bin/celery -A controlplane beat --loglevel=info

fmt: $(STAMP)
	@$(VENV)/bin/ruff check --fix .
	@$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache mutants .build
	rm -f queues/engine/*.so $(ENGINE_BUILD)
