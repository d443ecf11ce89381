# Quick start: `make demo` (install the runtime and matplotlib, run examples/demo.py: one model
# through the toolkit, a figure in examples/output/demo.png), `make test` (install the test
# extras, run every test), `make docs` (build the documentation site into site/).
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed-test
DEMO_STAMP = $(VENV)/.installed-demo
# the CPU wheel of PyTorch the test extras' torch range accepts (tests/test_adapters.py)
TORCH_CPU ?= torch==2.13.0

.PHONY: demo test docs venv bench clean

$(PY):
	@echo "==> creating the virtual environment $(VENV) ($(PYTHON) -m venv)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> upgrading pip"
	$(PY) -m pip install -q --upgrade pip

# The test extras (pytest, Dask, the docs stack) serve test, docs and bench; reinstalled when
# the metadata changes.
$(STAMP): setup.cfg pyproject.toml | $(PY)
	@echo "==> installing paramgeo with its test extras (pytest, Dask, mkdocs, torch, jax; a few minutes)"
	@echo "==> torch first as the CPU build $(TORCH_CPU) (a plain torch would pull a CUDA build of several GB)"
	$(PY) -m pip install '$(TORCH_CPU)'
	$(PY) -m pip install -e '.[test]'
	touch $(STAMP)

# The demo needs only the runtime (numpy, scipy, sympy, autograd, geomstats, networkx, click)
# and matplotlib: the plot extra.
$(DEMO_STAMP): setup.cfg pyproject.toml | $(PY)
	@echo "==> installing paramgeo with its runtime dependencies and matplotlib (the plot extra)"
	$(PY) -m pip install -e '.[plot]'
	touch $(DEMO_STAMP)

venv: $(STAMP)

demo: $(DEMO_STAMP)
	@echo "==> running examples/demo.py: one model through rank, symmetry, flow and implicit bias"
	MPLBACKEND=Agg $(PY) examples/demo.py

# The suite on two workers: pytest first collects the ~1500 tests (20 s to a minute with no
# output: every test module imports numpy, sympy, torch or jax), then prints lines of dots with
# the percentage done, and its time at the end; warnings provoked on purpose are asserted in
# the tests, so none are expected at the end.
test: $(STAMP)
	@echo "==> running the test suite: pytest on 2 workers (-n 2); collecting the ~1500 tests takes 20 s to a minute before the first dot, then each line ends with the percentage done"
	$(PY) -m pytest -q -n 2

# The site (mkdocs, material theme, API reference by mkdocstrings); --strict fails on a broken
# link or an unrenderable docstring. Nothing is downloaded at build time.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: $(STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) build site *.egg-info
