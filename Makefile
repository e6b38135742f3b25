# Run `make help` for the list. Every target installs what it needs into .venv first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTEST_ARGS ?=
# `make test` runs the suite on three processes (pytest-xdist), each with its own test
# database, Redis names and files (tests/early_env.py). Three on a two-core machine: many of
# its tests wait on the processes they start (workers, daphnes, Chromium), and with two the
# cores sat idle a fifth of the time; a third fills those waits (README, "CI"). The targets
# whose tests start no such process are bound by the CPU and run one process per core.
# PYTEST_ARGS="-n 0" runs any of them in one process.
PYTEST_WORKERS ?= -n 3
CPU_BOUND_WORKERS ?= -n 2
PORT   ?= 8000
# Python writes the bytecode of each module it imports next to it (__pycache__), so the next
# process reads it instead of compiling the source again. Some container images turn that
# off for every process; the suite starts many Python processes (xdist workers, celery
# workers, daphnes, commands), and each then compiled Django, Celery and the app from source.
unexport PYTHONDONTWRITEBYTECODE

.DEFAULT_GOAL := help
.PHONY: help deps lock run test test-fast test-sqlite mutation mutation-sample lint format migrations browser bench clean messages translations gettext screenshots cjk-font sandbox-venv bubblewrap

help:  ## List the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

# requirements.lock pins every dependency, transitive ones included, for Linux x86-64 and
# CPython 3.11; requirements.txt (the app's) and requirements-dev.txt (the tools') are what it
# is made from, by `make lock`. tests/test_requirements_lock.py fails when the two disagree.
# Exactly the lock is installed (--no-deps), and `check` fails if it lacks a dependency. uv
# installs it (pinned in the lock like the rest): on a fresh clone it takes a fraction of
# pip's time, downloading in parallel.
$(VENV)/.deps: requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet "$$(grep -E '^uv==' requirements.lock)"
	$(VENV)/bin/uv pip install --quiet --python $(PY) --no-deps -r requirements.lock
	$(VENV)/bin/uv pip check --python $(PY)
	touch $@

deps: $(VENV)/.deps  ## Create .venv and install requirements.lock

# LOCK_ARGS="--upgrade-package NAME" moves one package to its newest release that fits,
# "--upgrade" every package; by default the pins already in the lock are kept.
LOCK_ARGS ?=
lock:  ## Pin every dependency into requirements.lock (after editing a requirements file)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet "$$(grep -E '^uv==' requirements-dev.txt)"
	$(VENV)/bin/uv pip compile --quiet requirements-dev.txt --output-file requirements.lock \
	  --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --custom-compile-command "make lock" $(LOCK_ARGS)

run: deps  ## Migrate and start the whole app (daphne, celery worker and beat, Redis if REDIS_URL is unset)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	SECURE_SSL_REDIRECT=0 SESSION_COOKIE_SECURE=0 CSRF_COOKIE_SECURE=0 $(PY) manage.py serve --port $(PORT)

test: deps browser gettext sandbox-venv  ## Run the whole test suite (Redis is embedded if REDIS_URL is unset)
	$(PY) -m chatsite.server.process.embedded $(PY) -m pytest $(PYTEST_WORKERS) $(PYTEST_ARGS)

test-fast: deps gettext sandbox-venv  ## Only the tests that need no worker, daphne or browser
	$(PY) -m chatsite.server.process.embedded $(PY) -m pytest -m "not integration and not e2e" \
	  $(CPU_BOUND_WORKERS) $(PYTEST_ARGS)

# SQLite is the embedded default (`make run` with no DATABASE_URL). What differs there is
# covered by the run store's contract tests and a smoke set (the markers in pyproject.toml);
# the rest of the suite runs on PostgreSQL (`make test`).
test-sqlite: deps gettext  ## The contract and smoke tests on SQLite, whatever DATABASE_URL says
	env -u DATABASE_URL $(PY) -m chatsite.server.process.embedded $(PY) -m pytest -m "contract or smoke" \
	  $(CPU_BOUND_WORKERS) $(PYTEST_ARGS)

# Mutation testing of the safety-critical modules (docs/testing.md). Slow, and not part of
# `make test`; at the lowest priority. Narrow it with, e.g.,
# `make mutation MUTATE="agents.redaction* agents.ratelimit*"`. Of the executor, the
# decisions before a tool runs (approval, the budgets, the start of a call); the rest of it
# (driving the loop, streaming) is `MUTATE="agents.react.executor*"`.
DECISIONS := $(foreach f,_hold_before_tools _check_budget _start_tool,agents.react.executor.xǁAgentExecutorǁ$(f)__mutmut_*)
MUTATE ?= $(DECISIONS) agents.react.transcript* agents.react.parser* agents.redaction* \
	agents.services.usage* agents.ratelimit* agents.permissions* agents.selectors*

# The engine's mutants are checked by tests/react alone (tests/mutation_selection.py), whose
# sessions never touch the database: those run one per core. The others' tests share the one
# test database, which each session empties as it starts: those run one at a time.
ENGINE_MUTANTS = $(filter agents.react.%,$(MUTATE))
OTHER_MUTANTS = $(filter-out agents.react.%,$(MUTATE))
MUTMUT = $(PY) -m chatsite.server.process.embedded nice -n 19 $(VENV)/bin/mutmut run

mutation: deps  ## Mutation scores of approval, budgets, parser, redaction, quota, limits, scoping
	$(if $(ENGINE_MUTANTS),$(MUTMUT) --max-children $$(nproc) $(foreach m,$(ENGINE_MUTANTS),"$(m)"))
	$(if $(OTHER_MUTANTS),$(MUTMUT) --max-children 1 $(foreach m,$(OTHER_MUTANTS),"$(m)"))
	$(PY) -m tests.mutation_scores

# A seeded sample of one module's mutants, for a module too slow to check whole (the parser):
# `make mutation-sample MODULE=agents.react.parser SAMPLE=400 SEED=43`. The first mutmut run
# makes the mutants and learns which tests reach them, then stops on purpose (no mutant has
# that name); the second checks the sample.
MODULE ?= agents.react.parser
SAMPLE ?= 400
SEED ?= 43

mutation-sample: deps  ## Mutation score of a seeded sample of one module's mutants
	-$(MUTMUT) --max-children 1 "$(MODULE).x_not_a_function*"
	$(MUTMUT) --max-children 1 $$($(PY) -m tests.mutation_scores --sample $(MODULE) $(SAMPLE) $(SEED))
	$(PY) -m tests.mutation_scores

lint: deps  ## ruff check, ruff format --check, mypy, the import layers, and migrations in step with models
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache
	$(PY) manage.py makemigrations --check --dry-run

format: deps  ## Apply ruff's fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The `python` tool's code runs in a virtualenv of its own (numpy, pandas, matplotlib), never
# the app's: requirements-sandbox.txt pins every package, and uv installs exactly those.
# SANDBOX_VENV must match the app's setting of the same name (README, "Sandboxed Python").
# Its interpreter is the system's (Debian's /usr/bin/python3), which the sandbox's read-only
# /usr holds: one from under a home folder could not be reached by the sandbox's user.
SANDBOX_VENV ?= var/sandbox-venv
SANDBOX_BASE_PYTHON ?= $(or $(wildcard /usr/bin/python3),$(PYTHON))
$(SANDBOX_VENV)/.deps: requirements-sandbox.txt $(VENV)/.deps
	$(SANDBOX_BASE_PYTHON) -m venv --clear --without-pip $(SANDBOX_VENV)
	$(VENV)/bin/uv pip install --quiet --python $(SANDBOX_VENV)/bin/python --no-deps --compile-bytecode \
	  -r requirements-sandbox.txt
	$(VENV)/bin/uv pip check --python $(SANDBOX_VENV)/bin/python
	touch $@

sandbox-venv: $(SANDBOX_VENV)/.deps bubblewrap  ## The python tool's own virtualenv (and bubblewrap)

bubblewrap:  ## Install Debian's bubblewrap (the python tool's sandbox) if it is missing
	@command -v bwrap >/dev/null 2>&1 || { \
	  echo "bubblewrap is missing: installing Debian's package"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) >/dev/null; }

browser:  ## Install Debian's Chromium for the browser tests if it is missing
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "chromium is missing: installing Debian's package"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null; }

# The page strings (templates, Python, static/js) in locale/<lang>/LC_MESSAGES/*.po; the
# compiled .mo files are committed beside them, and a test keeps the two in step.
MESSAGES_IGNORE := --ignore=.venv --ignore=var --ignore=tests --ignore=bench --ignore='*/vendor/*'

messages: deps gettext  ## Re-extract the strings to translate into locale/*/LC_MESSAGES/*.po
	$(PY) manage.py makemessages --all --no-obsolete $(MESSAGES_IGNORE)
	$(PY) manage.py makemessages --all --no-obsolete -d djangojs $(MESSAGES_IGNORE)

translations: deps gettext  ## Compile locale/*.po into the .mo files the app reads
	$(PY) manage.py compilemessages --ignore=.venv --ignore=var

gettext:  ## Install Debian's gettext (msgfmt) if it is missing
	@command -v msgfmt >/dev/null 2>&1 || { \
	  echo "gettext is missing: installing Debian's package"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gettext) >/dev/null; }

cjk-font:  ## Install a Chinese font (Debian's WenQuanYi Micro Hei) if none is installed
	@fc-list :lang=zh | grep -q . || { \
	  echo "no Chinese font: installing Debian's fonts-wqy-microhei"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-wqy-microhei) >/dev/null; }

screenshots: deps browser gettext cjk-font  ## Retake the README's screenshots (bench/screenshots.py)
	$(PY) -m chatsite.server.process.embedded $(PY) bench/screenshots.py $(PYTEST_ARGS)

bench: deps  ## Run the benchmarks in bench/ (see docs/performance.md#how-to-measure)
	@echo "see docs/performance.md#how-to-measure; each script's docstring has its command"

clean:  ## Remove the virtualenv and local data in var/
	rm -rf $(VENV) var
