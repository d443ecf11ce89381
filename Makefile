# Quick start: `make demo` (set up and run the showcase), `make test` (set up and run tests),
# `make docs` (build the documentation site into site/).
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed-test

.PHONY: demo test docs venv bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# One install with the test extras serves both targets; reinstalled when metadata changes.
$(STAMP): setup.cfg pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/paramgeo list
	@echo
	$(VENV)/bin/paramgeo describe --all

test: $(STAMP)
	$(PY) -m pytest -q -n 2

# The site (mkdocs, material theme, API reference by mkdocstrings); --strict fails on a broken
# link or an unrenderable docstring. Nothing is downloaded at build time.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: $(STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) build site *.egg-info
