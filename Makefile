# Two entry points: `make run` (the main job) and `make test` (the full check suite).
# Each creates or reuses .venv and installs what it needs; only python3 and make are assumed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= dev,pipeline,bench,docs
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit clean

# Editable install in setuptools' "compat" mode (a .pth path entry) so type checkers find the
# package (the default import-hook mode hides it from mypy); exact versions from constraints.txt.
CONSTRAINTS := $(abspath constraints.txt)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) --config-settings editable_mode=compat \
		-e '.[$(EXTRAS)]'
	touch $(STAMP)

# The main job. Its executors replay with the compiled build when it can be built (that
# needs a C compiler and the Python headers; see executor-build below): once built, the job
# is told to use it (and checks it); if it could not be built, the job picks the fastest
# build it finds (--executor-python auto: the pure one) and says which.
run: $(STAMP)
	@$(MAKE) --no-print-directory executor-build || echo "make run: the compiled build" \
		"could not be built (see above); the executors replay with the pure build"
	$(PY) -m kpurgatory pipeline run --grid default --out build/pipeline --executor-python \
		"$$(if [ -f $(EXECUTOR_STAMP) ]; then echo $(COMPILED_VENV)/bin/python; else echo auto; fi)"

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(STAMP)
	$(PY) -m mypy --strict kpurgatory tests

# The quick suite on every core (pytest-xdist; PYTEST_WORKERS=0 runs it in one process).
PYTEST_WORKERS ?= auto
XDIST := -n $(PYTEST_WORKERS) --dist worksteal

unit: $(STAMP)
	$(PY) -m pytest -q $(XDIST)

test: lint typecheck unit

# Nightly-style equivalence run: reference vs optimized machines under the deep Hypothesis
# profile (2000 examples x 200 steps per machine; ~6 min CPU, no pytest timeout), then two
# minutes of real-thread histories per implementation (make history).
.PHONY: deep
deep: $(STAMP)
	HYPOTHESIS_PROFILE=deep $(PY) -m pytest -q -s --timeout 0 \
		tests/machines/test_equivalence_timer.py tests/machines/test_equivalence_purgatory.py
	$(MAKE) --no-print-directory history HISTORY_SECONDS=120

# The history checker's long campaign (docs/testing-techniques.md, "Histories"): random
# programs on 2-4 real threads against each implementation, every history searched for an
# interleaving of the spec's steps; rejected histories are shrunk, printed and written to
# build/history-failures/. HISTORY_SECONDS per implementation (the quick suite runs 150
# histories of each). Exit status 1 if any history was rejected or undecided.
HISTORY_SECONDS ?= 300
HISTORY_ARGS ?=
.PHONY: history freethreaded-history
history: $(STAMP)
	$(PY) -m kpurgatory.history --implementation both --seconds $(HISTORY_SECONDS) \
		--failures-dir build/history-failures $(HISTORY_ARGS)

# Compiled build: kpurgatory.optimized compiled with mypyc (KPURGATORY_COMPILE=1, setup.py) into
# a wheel installed in its own venv; the suite runs from a copy of the tree without kpurgatory/,
# so the installed compiled package is what the tests import (never a stale in-place .so).
COMPILED_DIR ?= build/compiled
COMPILED_VENV := $(abspath $(COMPILED_DIR))/venv
COMPILED_EXTRAS ?= dev,bench
COMPILED_PYTEST_ARGS ?=

.PHONY: compiled-venv compiled-test compiled-ci bench

# CI's compiled job: the whole quick suite against the compiled package. The monkeypatching
# mutants and the CrossHair CLI checks skip themselves there (compiled code has no source);
# the compiled build's own proof is that the equivalence machines (tests/machines) and the
# conformance vectors (tests/conformance) run in this job with the mypyc kpurgatory.optimized
# against the pure reference (pinned by tests/bench/test_compiled.py), as do the R35 input
# tests and the R38 subclass tests.
compiled-ci:
	$(MAKE) compiled-test COMPILED_EXTRAS=$(EXTRAS)

# The full benchmark run that makes docs/performance.md and docs/perf/ from one run of
# both builds (pure, then compiled; run it on a quiet machine). BENCH_MODE=reduced answers
# every question at reduced sizes, in a fraction of the time.
BENCH_MODE ?= full
bench: $(STAMP) compiled-venv
	$(PY) -m kpurgatory bench --$(BENCH_MODE) --out docs/perf --report docs/performance.md \
		--compiled-python $(COMPILED_DIR)/venv/bin/python

compiled-venv:
	rm -rf $(COMPILED_DIR)/dist $(COMPILED_VENV)
	$(PYTHON) -m venv $(COMPILED_VENV)
	$(COMPILED_VENV)/bin/python -m pip install --quiet --upgrade pip
	# mypy (which ships mypyc) is a build requirement of the compiled build only: installed
	# here, and the wheel is built without isolation (pyproject's build requires stay pure).
	$(COMPILED_VENV)/bin/python -m pip install --quiet -c $(CONSTRAINTS) setuptools mypy
	KPURGATORY_COMPILE=1 $(COMPILED_VENV)/bin/python -m pip wheel --quiet --no-deps \
		--no-build-isolation -w $(COMPILED_DIR)/dist .
	@if find kpurgatory -name '*.so' | grep -q .; then \
		echo "stale compiled modules in the source tree (delete them):"; \
		find kpurgatory -name '*.so'; exit 1; fi
	$(COMPILED_VENV)/bin/python -m pip install --quiet -c $(CONSTRAINTS) \
		"$$(ls $(COMPILED_DIR)/dist/kpurgatory-*.whl)[$(COMPILED_EXTRAS)]"

# The executor build (make run): the compiled venv plus what the pipeline's executors import
# besides kpurgatory (pyarrow, pandas; pyspark's Python comes from Spark itself). Built once
# (about 35 s) and again only when the package's sources change or another target rebuilt the
# venv. `kpurgatory pipeline run --executor-python auto` also finds it (in build/compiled/venv)
# and uses it when it was built from the driver's sources.
.PHONY: executor-build
PACKAGE_SOURCES := $(shell find kpurgatory -name '*.py' -not -path '*/__pycache__/*')
EXECUTOR_STAMP := $(COMPILED_VENV)/.executor-build

executor-build: $(EXECUTOR_STAMP)

$(EXECUTOR_STAMP): pyproject.toml constraints.txt setup.py $(PACKAGE_SOURCES)
	$(MAKE) --no-print-directory compiled-venv
	$(COMPILED_VENV)/bin/python -m pip install --quiet -c $(CONSTRAINTS) pyarrow pandas
	touch $@

compiled-test: compiled-venv
	$(PYTHON) -m kpurgatory.bench.compiled_suite copy-tree $(COMPILED_DIR)/tree
	cd $(COMPILED_DIR)/tree && $(COMPILED_VENV)/bin/python -m kpurgatory.bench.compiled_suite check
	cd $(COMPILED_DIR)/tree && KPURGATORY_EXPECT_COMPILED=1 $(COMPILED_VENV)/bin/python -m pytest -q \
		$(XDIST) $(COMPILED_PYTEST_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .ruff_cache .hypothesis

# Separate verification jobs (docs/verification.md): CrossHair contract checks with the CI
# bounds plus Hypothesis on the CrossHair backend, and the deep schedule bounds.
.PHONY: crosshair crosshair-backend slow
crosshair: $(STAMP)
	PY=$(PY) scripts/crosshair_check.sh --backend

# The Hypothesis properties of the pure functions on the CrossHair backend alone (CI job;
# the CrossHair check and diffbehavior already run inside `make test`, tests/contracts).
crosshair-backend: $(STAMP)
	$(PY) -m pytest -q -m crosshair

slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# Packaging job (CI, .ci/run): the pure wheel built with build isolation, installed in a fresh
# venv under /tmp, imported, `kpurgatory --version`, and the typed user program checked by
# mypy against the installed wheel and against an editable install (the mode above).
.PHONY: wheel-check
wheel-check:
	PYTHON=$(PYTHON) scripts/check_wheel.sh

# The conformance kit's own mutation score (CI, .ci/run): every port bug of the catalogue
# through the subprocess adapter, vectors and the stateful search on seeds 1-10 (about
# 20 minutes on this 2-core machine), and every concurrent plant through the threads mode
# on seeds 1-10 (also with Kafka's sweep accepted), its serialized control and the honest
# adapters (about 5 minutes); it prints the figures.
.PHONY: conformance-catalogue
conformance-catalogue: $(STAMP)
	$(PY) -m pytest -q -m slow -s tests/conformance/ports/test_catalogue.py \
		tests/conformance/ports/test_threads.py

# The pipeline on executors in other processes (CI, .ci/run): a tiny grid on
# local-cluster[2,1,1024] with PYSPARK_PYTHON unset, executors on the driver's interpreter and
# the shipped package zip (about 2 minutes on 2 cores), and again on the compiled build when
# build/compiled/venv has one (make executor-build; skipped otherwise); then a real standalone
# cluster (a master and two workers on 127.0.0.1, started from pyspark's spark-class and
# stopped by the test): the grid and a port's adapter replayed by its executors.
.PHONY: pipeline-cluster
pipeline-cluster: $(STAMP)
	$(PY) -m pytest -q -m slow tests/pipeline/test_cluster.py tests/pipeline/test_standalone.py

# The project's own mutation score (docs/verification.md, "Mutation score"; slow tier, not
# CI's quick path): a seeded sample of cosmic-ray mutants (its operators and the project's
# statement and lock removals) per module of protocol.py, reference/,
# optimized/, aio/ and the lifecycle helpers, each run against that module's quick tests
# and, if it survives them, the concurrency tier; equivalents listed in
# scripts/mutation_equivalents.txt are not run. Reports in build/mutation/. One module:
# make mutation MODULE=kpurgatory/_sweep.py (several: space-separated).
MODULE ?=
MUTATION_SAMPLE ?= 25
MUTATION_SEED ?= 1
MUTATION_STAMP := $(VENV)/.mutation-installed
.PHONY: mutation

# cosmic-ray and the project's own operators (statement and lock removal), a small local
# distribution cosmic-ray finds by its entry point (tools/cosmic_ray_kpurgatory).
$(MUTATION_STAMP): $(STAMP) tools/cosmic_ray_kpurgatory/pyproject.toml
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) --config-settings editable_mode=compat \
		-e '.[$(EXTRAS),mutation]'
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) --no-deps -e tools/cosmic_ray_kpurgatory
	touch $@

mutation: $(MUTATION_STAMP)
	nice -n 10 $(PY) scripts/mutation.py --sample $(MUTATION_SAMPLE) --seed $(MUTATION_SEED) \
		$(foreach module,$(MODULE),--module $(module))
# The free-threaded job (CI, .ci/run): CPython 3.13 built with --disable-gil (3.13t), found
# in FT_CACHE or built there once (scripts/build_freethreaded.sh: Debian trixie's source
# package, about 15 minutes), and a venv at build/freethreaded/venv with the package and
# the test dependencies that have wheels for it. The quick suite runs there with the GIL
# off (PYTHON_GIL=0); what needs pyspark, CrossHair, mypy or pyright skips itself, saying
# so. The pins that differ on that interpreter are in constraints-freethreaded.txt (they
# replace constraints.txt's pins of the same names). FT_CACHE lies outside the clone;
# point it at an existing build's prefix to reuse it.
FT_VERSION ?= 3.13.5
FT_DEBIAN_VERSION ?= 3.13.5-2+deb13u5
FT_CACHE ?= $(HOME)/.cache/kpurgatory/cpython-$(FT_VERSION)t
FT_PYTHON := $(FT_CACHE)/bin/python$(basename $(FT_VERSION))t
FT_DIR ?= build/freethreaded
FT_VENV := $(abspath $(FT_DIR))/venv
FT_PY := $(FT_VENV)/bin/python
FT_STAMP := $(FT_VENV)/.installed
FT_CONSTRAINTS := $(abspath $(FT_DIR))/constraints.txt
FT_PACKAGES ?= pytest pytest-timeout pytest-xdist hypothesis jsonschema aiohttp starlette \
	uvicorn pyperf psutil
FT_PYTEST_ARGS ?=

.PHONY: freethreaded freethreaded-python freethreaded-test bench-threads

freethreaded: $(FT_STAMP)

freethreaded-python:
	scripts/build_freethreaded.sh $(FT_CACHE) $(FT_VERSION) $(FT_DEBIAN_VERSION)

$(FT_STAMP): pyproject.toml constraints.txt constraints-freethreaded.txt \
		scripts/build_freethreaded.sh
	$(MAKE) --no-print-directory freethreaded-python
	rm -rf $(FT_VENV)
	mkdir -p $(FT_DIR)
	awk -F'==' 'NR == FNR { if ($$1 !~ /^#/ && NF == 2) replaced[$$1] = 1; print; next } \
		!($$1 in replaced)' constraints-freethreaded.txt constraints.txt > $(FT_CONSTRAINTS)
	$(FT_PYTHON) -m venv $(FT_VENV)
	$(FT_PY) -m pip install --quiet --upgrade pip
	$(FT_PY) -m pip install --quiet --only-binary :all: -c $(FT_CONSTRAINTS) $(FT_PACKAGES)
	$(FT_PY) -m pip install --quiet --no-deps --config-settings editable_mode=compat -e .
	$(FT_PY) -c "import sys, kpurgatory; assert not sys._is_gil_enabled(), 'the GIL is on'"
	touch $@

freethreaded-test: $(FT_STAMP)
	PYTHON_GIL=0 $(FT_PY) -m pytest -q $(XDIST) $(FT_PYTEST_ARGS)

# The history checker's long campaign on 3.13t with the GIL off (CI, .ci/run).
freethreaded-history: $(FT_STAMP)
	PYTHON_GIL=0 $(FT_PY) -m kpurgatory.history --implementation both \
		--seconds $(HISTORY_SECONDS) --failures-dir build/history-failures-ft $(HISTORY_ARGS)

# The threads benchmark (docs/performance.md, "Threads"): the acks=all pattern on 1, 2, 4
# and 8 threads, one shared purgatory against a purgatory, timer and class per thread and
# against a shared class only, interleaved rounds in each interpreter: this build, the
# compiled one if built (make compiled-venv), and the free-threaded one with the GIL off
# and on (run it on a quiet machine; the report gives the load average of each run).
BENCH_THREADS_OPTIONS ?= -r 5 -n 2000
BENCH_THREADS_DIR ?= build/bench-threads
bench-threads: $(STAMP) $(FT_STAMP)
	mkdir -p $(BENCH_THREADS_DIR)
	rm -f $(BENCH_THREADS_DIR)/*.json
	$(PY) -m kpurgatory.bench.threads $(BENCH_THREADS_OPTIONS) -o $(BENCH_THREADS_DIR)/gil.json
	# -P: not the source tree (the working directory) but the compiled package installed there
	if [ -x $(COMPILED_VENV)/bin/python ]; then $(COMPILED_VENV)/bin/python -P -m \
		kpurgatory.bench.threads $(BENCH_THREADS_OPTIONS) -o $(BENCH_THREADS_DIR)/gil-compiled.json; fi
	PYTHON_GIL=0 $(FT_PY) -m kpurgatory.bench.threads $(BENCH_THREADS_OPTIONS) \
		-o $(BENCH_THREADS_DIR)/ft-gil-off.json
	PYTHON_GIL=1 $(FT_PY) -m kpurgatory.bench.threads $(BENCH_THREADS_OPTIONS) \
		-o $(BENCH_THREADS_DIR)/ft-gil-on.json
	$(PY) -m kpurgatory.bench.threads report $(BENCH_THREADS_DIR)/*.json
