# Two entry points: `make run` (the main job) and `make test` (the full check suite).
# Each creates or reuses .venv and installs what it needs; only python3 and make are assumed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= dev,pipeline,bench,docs
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m kpurgatory demo

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(STAMP)
	$(PY) -m mypy --strict kpurgatory tests

unit: $(STAMP)
	$(PY) -m pytest -q

test: lint typecheck unit

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .ruff_cache .hypothesis
