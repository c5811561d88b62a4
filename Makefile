# autotune: developer and CI entry points (GNU make).
#   make run    install, list the workloads, check every one against numpy
#   make test   install, lint, run the test suite
#   make lint   ruff + mypy
#   make golden rewrite tests/golden/*.txt from the current output

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.DEFAULT_GOAL := test

.PHONY: install test lint run clean golden

# The stamp is rebuilt when pyproject.toml changes. Needs only python3 >= 3.10 and PyPI.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
		|| { echo "autotune needs Python >= 3.10 (found: $$($(PYTHON) --version 2>&1))" >&2; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[test]"
	touch $@

install: $(VENV)/.installed

test: install
	$(VENV)/bin/ruff check autotune tests
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check autotune tests
	-$(VENV)/bin/mypy autotune

# List the chains, then check each one at its default size against numpy (12-25 s; see README "Usage").
run: install
	$(VENV)/bin/autotune workloads
	$(VENV)/bin/autotune check --all

golden: install
	$(PY) -m pytest --update-golden

clean:
	rm -rf $(VENV) .cache .pytest_cache .ruff_cache .mypy_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
