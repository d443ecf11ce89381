# Quick start: `make demo` (set up and run the showcase) and `make test` (set up and run tests).
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed-test

.PHONY: demo test venv bench clean

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

bench: $(STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) build *.egg-info
