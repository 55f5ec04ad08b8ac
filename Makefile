# Two commands do all the set-up: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
UV_VERSION := 0.13.9
STAMP  := $(VENV)/.installed
CORES  ?= all
# Config files to use instead of config.yaml, merged in order (`make run CONFIG="config.yaml
# config/papers.yaml"`). check-config reads them first: Snakemake reads --configfile files before
# the workflow runs, and a missing, empty or broken one would end in its traceback.
CONFIG ?=
SNAKEMAKE = $(if $(CONFIG),$(BIN)/python -m kernelscale.pipeline.cli check-config $(CONFIG) >/dev/null && )$(BIN)/snakemake
CONFIGFILE = $(if $(CONFIG),--configfile $(CONFIG))
# Before snakemake (the Snakefile acts on no file, so a dry run changes nothing): a second run
# beside a running one stops in one line naming the lock's holder instead of Snakemake's
# five-line LockException; else a lock left by a killed snakemake is removed and damaged
# prepared datasets are set aside, so that prepare re-runs (`make repair` alone; recovery.py).
REPAIR = $(BIN)/python -m kernelscale.pipeline.cli repair $(or $(CONFIG),config.yaml) &&

.PHONY: run repair test test-quick test-slurm test-gpu test-gpu-sim lint env lock clean-results dryrun

env: $(STAMP)

# The venv is rebuilt only when the lock or the project metadata change.
# uv (pinned) installs the lock ~10x faster than pip; bytecode is compiled at install
# because this machine sets PYTHONDONTWRITEBYTECODE (import mlflow would otherwise cost ~5 s).
$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode -r requirements.lock
	$(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode --no-deps -e .
	touch $(STAMP)

run: $(STAMP)
	$(REPAIR) $(SNAKEMAKE) --cores $(CORES) $(CONFIGFILE)

repair: $(STAMP)
	$(BIN)/python -m kernelscale.pipeline.cli repair $(or $(CONFIG),config.yaml)

# Snakemake report (tables, plots, provenance) in results/report.html, of the last `make run`
# and, once `make reproduce` has left results/reproduce/verdicts.md, of its figures and verdicts
# too ("Reproduce"; `reproduce` alone when no `make run` has left results/tables/summary.csv).
# Snakemake reports only the targets it is given, and stops on a missing report() file.
REPORT_TARGETS = $(if $(wildcard results/reproduce/verdicts.md),$(if $(wildcard results/tables/summary.csv),all) reproduce)
.PHONY: report
report: $(STAMP)
	$(REPAIR) $(SNAKEMAKE) $(REPORT_TARGETS) --cores $(CORES) --report results/report.html $(CONFIGFILE)

# Scale benchmark (`kernelscale bench`) through the pipeline: results/bench/, MLflow; options from
# config.yaml's `bench:` section (docs/benchmarks.md).
.PHONY: bench
bench: $(STAMP)
	rm -f results/bench/bench.md
	$(REPAIR) $(SNAKEMAKE) bench --cores $(CORES) $(CONFIGFILE)

# The seed papers' headline claims on ../shared/devdata (`kernelscale reproduce`, settings in
# config/reproduce.yaml): results/reproduce/ (figures, verdicts.md), MLflow; `make report` then
# adds the figures to results/report.html.
.PHONY: reproduce
reproduce: $(STAMP)
	rm -f results/reproduce/verdicts.md
	$(REPAIR) $(SNAKEMAKE) reproduce --cores $(CORES) $(CONFIGFILE)

# The peer race (benchmarks/peers.py): kernelscale against Falkon, EigenPro 2, GPyTorch and
# scikit-learn in its own optional environment, .venv-peers (never `make test`'s): the lock, the
# pins of benchmarks/peers-requirements.txt (a CPU torch: local wheels where pip's find-links has
# them, else torch's CPU index), then Falkon (C++ extension, CPU only, one compile job: ~8 min)
# and EigenPro 2 built from their sources in PEERS_SRC. `make peers PEERS_ARGS="..."` runs it.
PEERS_VENV := .venv-peers
PEERS_BIN  := $(PEERS_VENV)/bin
PEERS_SRC  ?= ../shared/peers
PEERS_ARGS ?= --data fashion-mnist kin40k protein
# torch 2.13.0+cpu: from pip's find-links where they hold it (these machines), otherwise from the
# index given as PEERS_TORCH_INDEX="--extra-index-url <torch's CPU wheel index> --index-strategy unsafe-best-match"
PEERS_TORCH_INDEX ?=
PEERS_TORCH = $(if $(PIP_FIND_LINKS),--find-links $(PIP_FIND_LINKS)) $(PEERS_TORCH_INDEX)
.PHONY: peers-env peers
peers-env: $(PEERS_VENV)/.installed
$(PEERS_VENV)/.installed: requirements.lock benchmarks/peers-requirements.txt pyproject.toml | $(STAMP)
	test -x $(PEERS_BIN)/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(BIN)/uv pip install -q --python $(PEERS_BIN)/python $(PEERS_TORCH) -r requirements.lock -r benchmarks/peers-requirements.txt
	$(BIN)/uv pip install -q --python $(PEERS_BIN)/python --no-deps -e .
	build=$$(mktemp -d) && tar xzf $(PEERS_SRC)/falkon-387d456.tar.gz -C $$build \
	  && tar xzf $(PEERS_SRC)/eigenpro2-bec4927.tar.gz -C $$build \
	  && FORCE_ONLY_CPU=1 MAX_JOBS=1 $(PEERS_BIN)/python -m pip install -q --no-build-isolation --no-deps $$build/falkon-387d456 \
	  && $(PEERS_BIN)/python -m pip install -q --no-build-isolation --no-deps $$build/eigenpro2-bec4927 \
	  && rm -rf $$build
	$(PEERS_BIN)/python -c "import falkon, eigenpro2, gpytorch, kernelscale"
	touch $@

peers: peers-env
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 nice $(PEERS_BIN)/python benchmarks/peers.py $(PEERS_ARGS)

# MLflow's UI on the tracking store of config.yaml (or of CONFIG's files, merged in order): prints
# the address of the experiment's runs table first (MLflow 3 opens an experiment's bare address on
# its GenAI pages), then serves until Ctrl-C. UI_HOST=0.0.0.0 serves other machines too.
UI_HOST ?= 127.0.0.1
UI_PORT ?= 5000
define UI_PY
import os, sys, yaml
from kernelscale.pipeline.configuration import tracking
from kernelscale.pipeline.tracking import runs_table_url
mlflow, host, port, *files = sys.argv[1:]
given = {}
for f in files:
    given.update((yaml.safe_load(open(f)) or {}).get("tracking") or {})
t = tracking({"tracking": given})
print("MLflow runs table:", runs_table_url(t["uri"], t["experiment"], f"http://{host}:{port}"), flush=True)
os.execv(mlflow, [mlflow, "ui", "--backend-store-uri", t["uri"], "--host", host, "--port", port])
endef
export UI_PY
.PHONY: ui
ui: $(STAMP)
	@$(BIN)/python -c "$$UI_PY" $(BIN)/mlflow $(UI_HOST) $(UI_PORT) $(or $(CONFIG),config.yaml)

dryrun: $(STAMP)
	$(SNAKEMAKE) --cores $(CORES) -n $(CONFIGFILE)

# The whole suite: installs nothing outside the repository and starts no system service; the
# tests that install and start Slurm (root, apt-get, /etc/slurm, daemons) skip, saying so, unless
# KERNELSCALE_TEST_SLURM=1 (as CI sets it) or `make test-slurm`.
test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(MAKE) test-gpu-sim

# tests/test_slurm.py with the tests that install slurm-wlm + munge and start a one-node cluster.
test-slurm: $(STAMP)
	KERNELSCALE_TEST_SLURM=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_slurm.py

# The edit-test loop (~100 s on 2 cores; `make test` takes 14-16 min): no end-to-end, Slurm or
# GPU tests, nor the files and tests that take most of the suite's time (dask clusters, Snakemake
# subprocesses, convergence to exact kernel ridge, divergence sweeps, scikit-learn's checks of the
# baselines and of every estimator at its defaults); stops at the first failure.
QUICK_SKIP = $(foreach f,divergence* distributed* spread* scale* realdata_defaults faults data_memory \
  baselines_checks sklearn_defaults workflow_pipeline reproduce slurm sparse peers,--ignore-glob='tests/test_$(f).py') \
  --ignore=tests/gpu -k "not converge and not learnable_problem and not norma_is_stable \
  and not norma_auto_max_terms and not resume and not selection_result_is_unchanged \
  and not spread_over_dask and not paper_configs and not under_snakemake"
test-quick: $(STAMP)
	$(BIN)/python -m pytest -q -x -p no:cacheprovider -m "not slow and not slurm and not gpu" \
	  $(QUICK_SKIP)

# GPU suite (tests/gpu: imports the library only). Runs under the first Python that already
# imports cupy (a GPU image's own, with zarr/dask on its path, or the venv); otherwise installs
# cupy for the driver's CUDA major (12 or 13, from nvidia-smi) into the venv. No registry is
# needed where cupy is already installed.
GPU_PYTHON ?= $(shell for p in $(BIN)/python python3; do $$p -c "import cupy" 2>/dev/null && { echo $$p; break; }; done)
test-gpu:
	@py="$(GPU_PYTHON)"; \
	if [ -z "$$py" ]; then \
	  $(MAKE) env || exit 1; \
	  cuda=$$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p'); \
	  [ "$$cuda" = 13 ] || cuda=12; \
	  $(BIN)/uv pip install -q --python $(BIN)/python "cupy-cuda$${cuda}x[ctk]" || exit 1; \
	  py=$(BIN)/python; \
	fi; \
	echo "test-gpu: $$py"; \
	PYTHONPATH=src$${PYTHONPATH:+:$$PYTHONPATH} $$py -m pytest -q -p no:cacheprovider tests/gpu

# The GPU suite against tests/gpu/fakecupy, a numpy stand-in that enforces cupy's host/device
# rules: catches numpy/cupy mix-ups on machines without a GPU (part of `make test`).
test-gpu-sim: $(STAMP)
	PYTHONPATH=tests/gpu/fakecupy $(BIN)/python -m pytest -q -p no:cacheprovider tests/gpu

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/snakemake --lint

# Re-resolve pinned versions after editing pyproject.toml dependencies.
lock:
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 -o requirements.lock

clean-results:
	rm -rf results/*
