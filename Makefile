# autotune: developer and CI entry points (GNU make).
#   make run    install, tune examples/small.yaml into out/small (search, best schedule, report)
#   make test   install, lint, run the test suite (on 2 pytest-xdist workers: PYTEST_WORKERS=)
#   make lint   ruff + mypy
#   make golden rewrite tests/golden/*.txt from the current output

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# Two pytest-xdist workers, whole files to one worker (module fixtures such as the Ray cluster are set
# up once): a cold kernel cache took 529 s on two workers for 1,678 tests (AMD EPYC Zen 5, 2 cores).
PYTEST_WORKERS ?= -n 2 --dist loadfile

.DEFAULT_GOAL := test

.PHONY: install test lint run clean golden

# The stamp is rebuilt when pyproject.toml changes. Needs only python3 >= 3.10 and PyPI.
# `test` holds the test tools, `dev` the linters (ruff, mypy); `make test` lints, so both are installed.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
		|| { echo "autotune needs Python >= 3.10 (found: $$($(PYTHON) --version 2>&1))" >&2; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[test,dev]"
	touch $@

install: $(VENV)/.installed

test: install
	$(VENV)/bin/ruff check autotune tests
	$(VENV)/bin/mypy autotune
	$(PY) -m pytest $(PYTEST_WORKERS)

lint: install
	$(VENV)/bin/ruff check autotune tests
	$(VENV)/bin/mypy autotune

# Tune examples/small.yaml (pool_chain, 16 trials, 2 Ray workers) into out/small, from scratch
# (about a minute on 2 cores): trials.jsonl, best.json, best_ir.txt, best_kernel.py, report.md + PNGs.
run: install
	rm -rf out/small
	$(VENV)/bin/autotune run examples/small.yaml --output out/small

golden: install
	$(PY) -m pytest --update-golden

clean:
	rm -rf $(VENV) .cache .pytest_cache .ruff_cache .mypy_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
