# Two commands do all the set-up on a fresh machine:
#   make lab    -- JupyterLab on notebooks/, opened at 00-start-here (creates .venv first if needed)
#   make test   -- the whole test suite (creates .venv first if needed)

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One stamp per bundle, so that each command installs what it needs and no more:
# make lab the notebooks' extra alone; make test every extra and the tools the tests
# drive (a superset of the lab's, so it stamps both); make docs the site's.
LAB_STAMP := $(VENV)/.lab-installed
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed
# JupyterLab refuses to run as root unless told to; containers and CI often are root.
# `id -u` is the effective uid, asked of make's /bin/sh only when `make lab` runs.
LAB_ROOT_FLAG = $(if $(filter 0,$(shell id -u)),--allow-root)
# Extra arguments for JupyterLab, e.g. make lab LAB_ARGS='--no-browser --port=8899'
LAB_ARGS ?=

.PHONY: lab test test-fast docs exercises prose test-all-pythons lint bench clean

# Python writes its bytecode caches (__pycache__, ignored by git) even where the environment
# says not to: otherwise every test worker, notebook kernel and command-line run compiles
# the package and pytest rewrites every test file anew (about 0.2 s of CPU per process).
unexport PYTHONDONTWRITEBYTECODE

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(LAB_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[lab]'
	touch $(LAB_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[lab,test]'
	touch $(STAMP) $(LAB_STAMP)

$(DOCS_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

lab: $(LAB_STAMP)
	$(BIN)/jupyter lab notebooks/00-start-here.ipynb $(LAB_ROOT_FLAG) $(LAB_ARGS)

# Four runs at the same time (tests/together.py), so that what one waits on the others fill:
# - the suite in three processes on the two cores (its tests wait on sockets, subprocesses
#   and sleeps part of the time), a test file per process (a notebook's cells stay
#   together), the longest files first (tests/longest_first.py: xdist keeps that order);
# - the tests that drive a browser or a real server, a test to whichever of two processes is
#   free: they mostly wait on their browser and servers;
# - the documentation site's build (tests/docs/site_builds.py), every notebook one after
#   another: the site's tests come last in both runs above and copy it;
# - the kernel's choice of path, its arrays and its summaries, and the pinned command lines,
#   once more as on an install without the [fast] extra (numba cannot be imported: the
#   plain-Python paths alone), with the fast tier's fifth of the randomized checks'
#   examples. This checks the install without numba (what `auto` picks, what falls back):
#   the plain replay's item-by-item equality with the engine runs at full size in the suite
#   (the equality files' `plain` cases, the same code with or without numba), not again here.
# Then, one at a time and beside nothing else, the tests that time a real run as it goes and
# check a twin calibrated from it (marked `measures`: beside another test what they time is
# partly the neighbour's). The browser-and-server and the measuring runs collect only the
# files that hold their marks (tests/marked_files.py), not the whole suite again.
# numpy's BLAS (OpenBLAS) starts a thread per core in every process that imports it, and
# those threads spin after each call: with two test workers on two cores they only take the
# other worker's CPU (a calibration test file cost 78 s of CPU with them, 20 s without).
test: export OPENBLAS_NUM_THREADS ?= 1
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m tests.services_setup
	$(BIN)/python -m tests.warm_kernel
	$(BIN)/python -m tests.together \
	  '$(BIN)/pytest -n 3 --dist loadfile --no-loadscope-reorder -m "not browser and not service and not measures"' \
	  '$(BIN)/pytest -n 2 --dist worksteal -m "(browser or service) and not measures" $$($(BIN)/python -m tests.marked_files browser service)' \
	  '$(BIN)/python -m tests.docs.site_builds' \
	  'PIPELINE_TEST_WITHOUT_NUMBA=1 PIPELINE_TEST_TIER=fast $(BIN)/pytest -q -n 2 \
	    tests/sim/running/kernel/test_paths.py tests/sim/running/kernel/test_kernel_arrays.py \
	    tests/sim/running/kernel/test_summary_once.py tests/cli/test_cli_golden.py'
	$(BIN)/pytest -m measures $$($(BIN)/python -m tests.marked_files measures)

# The fast tier, for every change: ruff, then the tests on both cores without notebooks, the
# browser, real servers, the install test or the long checks (tests/tiers.py says which).
test-fast: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m tests.tiers

# The documentation site, built offline into docs/_build/html (open index.html there):
# the guide, the notebooks executed with their figures, the API reference. Warnings are errors.
docs: $(DOCS_STAMP)
	$(BIN)/python -m sphinx -b html -W --keep-going -q docs docs/_build/html

# The exercises' checks, built from the solutions (the otter-grader masters in
# notebooks/solutions/): each student notebook's answer and grader.check cells, and the
# grading bundles in build/exercises/ (docs/workshop.md: grading a room's notebooks).
exercises: $(LAB_STAMP)
	$(BIN)/python -m pipeline.lessons.exercises build

# The numbers the notebooks' prose shows before Run All: each notebook run top to bottom in a
# fresh kernel, its MyST inline expressions evaluated, the values saved in its markdown cells
# (pipeline/lessons/prose.py; the notebook tests check them). NOTEBOOKS=... for only some.
prose: $(LAB_STAMP)
	$(BIN)/python -m pipeline.lessons.prose $(NOTEBOOKS)

# The fast tests (no notebooks, browser or slow checks) on each of Python 3.11, 3.12
# and 3.13 that is on PATH (or in pyenv), each in its own .venv-3.X; absent ones are listed.
test-all-pythons:
	$(PYTHON) -m tests.all_pythons

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python bench/bench_engine.py
	$(BIN)/python bench/bench_sim.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python bench/bench_kernel.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python bench/bench_controls.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python bench/bench_autoscale.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python bench/bench_metastable.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python bench/bench_recovery_map.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python bench/bench_events.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python bench/bench_chain.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python bench/bench_ingest.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python bench/bench_soak.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python bench/bench_metrics.py --items 50000 --repeats 15
	$(BIN)/python bench/bench_vloop.py
	$(BIN)/python bench/bench_explorer.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python bench/bench_widgets.py
	env -u OPENBLAS_NUM_THREADS $(BIN)/python bench/bench_startup.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python bench/bench_memory.py

clean:
	rm -rf $(VENV) .venv-3.* artifacts .pytest_cache docs/_build
