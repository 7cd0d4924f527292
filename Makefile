# Two commands on a fresh machine:  `make run` (offline default)  and  `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# Every package of the runtime + workflow + test extras, pinned with hashes, in two locks of the same
# versions: $(LOCK) with torch 2.13.0+cpu (the PyTorch CPU index's wheel) and $(LOCK_CUDA) with PyPI's
# torch 2.13.0 and its CUDA runtime packages (GPU nodes: `make setup TORCH=cuda`). condeval itself goes in
# editable without dependencies, so nothing floats. A venv remembers its flavour ($(VENV)/.torch), so a
# later `make run` or `make test` on a CUDA venv never reinstalls the CPU lock over it.
LOCK := requirements/lock.txt
LOCK_CUDA := requirements/lock-cuda.txt
# where pip finds torch 2.13.0+cpu: this machine's copy of the CPU index's wheel (same sha256), else the index
TORCH_CPU_WHEELS ?= $(if $(wildcard /opt/wheels/torch-2.13.0+cpu-*.whl),/opt/wheels,https://download.pytorch.org/whl/cpu/torch/)
TORCH ?= $(shell cat $(VENV)/.torch 2>/dev/null || echo cpu)
ifeq ($(TORCH),cpu)
SETUP_LOCK := $(LOCK)
SETUP_LINKS := --find-links $(TORCH_CPU_WHEELS)
else ifeq ($(TORCH),cuda)
SETUP_LOCK := $(LOCK_CUDA)
SETUP_LINKS :=
else
$(error TORCH must be cpu or cuda, not '$(TORCH)')
endif
STAMP := $(VENV)/.installed-$(TORCH)
LOCK_VENV := $(VENV)/lock-tools
LOCK_FLAGS ?=
LOCK_ARGS := --generate-hashes --allow-unsafe --all-build-deps --strip-extras --no-emit-index-url \
    --no-emit-find-links --extra workflow --extra test --extra lint --extra docs
# Both locks resolve against PyPI itself, whatever this machine's pip configuration adds.
LOCK_ENV := env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null

.PHONY: setup lock envs cellprofiler run report ablations scaling rehearse test test-fast docs bench bench-crc bench-i2t bench-t2i bench-trust lint format share fetch clean

# pip compiles every installed module one file at a time; compileall does it on every core afterwards
# (install 3 min 55 s -> 2 min 5 s + 57 s on 2 cores). The bytecode must exist before any job: under
# PYTHONDONTWRITEBYTECODE (set here and in CI) nothing is written at import time, and every job would
# compile torch and transformers from source again. Like pip, it skips files that do not parse (a few
# packages ship templates and Python-2 test data), hence `|| true`.
$(STAMP): pyproject.toml $(SETUP_LOCK)
	@if [ -f $(VENV)/.torch ] && [ "$$(cat $(VENV)/.torch)" != $(TORCH) ]; then \
	    echo "$(VENV) holds the $$(cat $(VENV)/.torch) torch; remove it or use another VENV= for TORCH=$(TORCH)" >&2; exit 1; fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --no-compile --require-hashes $(SETUP_LINKS) -r $(SETUP_LOCK)
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null || true
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	echo $(TORCH) > $(VENV)/.torch
	touch $(STAMP)

setup: $(STAMP)

# Regenerate both locks after changing the dependency lists in pyproject.toml (existing pins are kept
# where still allowed; `make lock LOCK_FLAGS=--upgrade` bumps everything). The CUDA lock is constrained
# to the CPU lock's versions, so the two differ only in torch and what PyPI's torch alone requires
# (tests/test_locks.py). pip-tools lives in its own venv (pyproject.toml [dependency-groups] dev).
lock:
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install -q pip==26.3
	$(LOCK_VENV)/bin/pip install -q --group dev
	$(LOCK_ENV) CUSTOM_COMPILE_COMMAND="make lock  [= pip-tools 7.6.2: pip-compile $(LOCK_ARGS) --find-links TORCH_CPU_WHEELS]" \
	    $(LOCK_VENV)/bin/pip-compile $(LOCK_FLAGS) --quiet $(LOCK_ARGS) --find-links $(TORCH_CPU_WHEELS) \
	    --output-file $(LOCK) pyproject.toml
	sed -n 's/^\([A-Za-z0-9._-]*==[^ ]*\).*/\1/p' $(LOCK) | grep -v '^torch==' > $(LOCK_VENV)/cpu-pins.txt
	$(LOCK_ENV) CUSTOM_COMPILE_COMMAND="make lock  [= pip-tools 7.6.2: pip-compile $(LOCK_ARGS) --constraint <$(LOCK)'s pins but torch>]" \
	    $(LOCK_VENV)/bin/pip-compile $(LOCK_FLAGS) --quiet $(LOCK_ARGS) --constraint $(LOCK_VENV)/cpu-pins.txt \
	    --output-file $(LOCK_CUDA) pyproject.toml
	$(PYTHON) tools/make_envs.py

# The rules' conda environments (envs/*.yaml) from $(LOCK) (standard library only; `make lock` ends with it).
# tests/workflow/test_envs.py fails while they are stale.
envs:
	$(PYTHON) tools/make_envs.py

# CellProfiler 4.2.8 in its own venv (the trust track's Section 5.1.3); root installs the Debian packages it needs.
CELLPROFILER := .cellprofiler
$(CELLPROFILER)/.installed: tools/cellprofiler-env.sh tools/cellprofiler-requirements.txt
	bash tools/cellprofiler-env.sh $(CELLPROFILER)

cellprofiler: $(CELLPROFILER)/.installed

# The two venvs build side by side: pip unpacks on one core while CellProfiler's venv builds on the other
# (neither reads the other; SLURM's packages go in before CellProfiler's, as both may run apt-get).
.PHONY: envs-side-by-side system-deps
envs-side-by-side:
	$(MAKE) --no-print-directory --output-sync=target -j2 setup system-deps SYSTEM_DEPS="$(SYSTEM_DEPS)"

system-deps:
	for target in $(SYSTEM_DEPS); do $(MAKE) --no-print-directory $$target || exit 1; done

run: SYSTEM_DEPS = cellprofiler
run: envs-side-by-side
	$(BIN)/snakemake --profile profiles/local
	$(BIN)/snakemake --profile profiles/local --report reports/report.html

report: setup
	$(BIN)/snakemake --profile profiles/local --report reports/report.html

# CReL Appendix C (ablations: the synthetic ones, image-to-text's Fig. 6 and text-to-image's Fig. 7) and Appendix E (calibration
# runtime scaling): separate targets, each then rebuilds the report with its tables and figures beside Table 1's.
ablations: setup
	$(BIN)/snakemake --profile profiles/local ablations crel_i2t_num_z0 crel_t2i_num_z0
	$(BIN)/snakemake --profile profiles/local --report reports/report.html all ablations crel_i2t_num_z0 crel_t2i_num_z0

scaling: setup
	$(BIN)/snakemake --profile profiles/local scaling
	$(BIN)/snakemake --profile profiles/local --report reports/report.html all scaling

# The paper config's rehearsal (condeval.rehearsal): its whole DAG in rehearsal/ on data and checkpoints
# written here in the real formats, served on loopback to the paper config's own fetch rules.
rehearse: setup
	$(BIN)/python tools/rehearse.py rehearsal

# CReL image-to-text: one captioner sampled at several temperatures (crel.image_to_text.temperature_sweep).
temperature: setup
	$(BIN)/snakemake --profile profiles/local crel_i2t_temperature
	$(BIN)/snakemake --profile profiles/local --report reports/report.html all crel_i2t_temperature

# tests/workflow/test_slurm.py runs the workflow on a localhost SLURM cluster: root, and Debian's packages.
# Two pytest-xdist workers, one test module a unit, queued by tests/conftest.py so that the shared tiny run
# of every track starts first on one worker while the other takes the modules that do not read it
# (TEST_WORKERS=0 runs them in one process, in collection order).
TEST_WORKERS ?= 2
test: SYSTEM_DEPS = slurm-deps cellprofiler
test: envs-side-by-side
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: slurm-deps
slurm-deps:
	bash tools/slurm-localhost.sh install

test-fast: setup
	$(BIN)/pytest -m "not slow"

# The documentation site (mkdocs.yml) into site/, strict: a broken link or API reference fails it.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

bench: setup
	$(BIN)/python benchmarks/bench_calibration.py --out benchmarks/out/calibration.json
	$(BIN)/python benchmarks/bench_paper_scale.py --out benchmarks/out/paper_scale.json

# Encoders' and captioners' items per second, on the models of a finished `make run`.
bench-crc: setup
	$(BIN)/python benchmarks/bench_crc.py --out benchmarks/out/crc.json

bench-i2t: setup
	$(BIN)/python benchmarks/bench_i2t_throughput.py --run-dir . --out benchmarks/out/i2t_throughput.json
	$(BIN)/python benchmarks/bench_allocator.py --out benchmarks/out/allocator.json

# Text-to-image generators' images per second, batched against a per-image loop (finished `make run`).
bench-t2i: setup
	$(BIN)/python benchmarks/bench_t2i_throughput.py --run-dir . --out benchmarks/out/t2i_throughput.json

# The trust score's samples per second at D = 768 against the definition's quadratic forms, and KID
# against torchmetrics' (synthetic features: needs no run).
bench-trust: setup
	$(BIN)/python benchmarks/bench_trust.py --out benchmarks/out/trust.json

# Snakemake's linter, ruff (rules in pyproject.toml [tool.ruff]), ruff's formatter and snakefmt
# ([tool.snakefmt]) in check mode; all four run, and any finding fails the target. `make format`
# applies the fixable lints and both formatters.
lint: setup
	status=0; \
	$(BIN)/snakemake --lint || status=1; \
	$(BIN)/ruff check . || status=1; \
	$(BIN)/ruff format --check . || status=1; \
	$(BIN)/snakefmt --no-sort --check . || status=1; \
	exit $$status

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
	$(BIN)/snakefmt --no-sort .

# Share a run with the lab (dvc.yaml): `dvc repro` records every track's outputs and Snakemake's
# metadata (nothing to redo after `make run`), `dvc push` uploads them, git keeps dvc.lock.
share: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro
	$(BIN)/dvc push
	git add dvc.lock

# A colleague's side: pull, refuse anything DVC cannot vouch for (a corrupted cache object shows up
# as "not in cache"), then Snakemake must find nothing to do.
fetch: setup
	$(BIN)/dvc pull
	$(BIN)/dvc status --quiet || { $(BIN)/dvc status; echo "dvc status: the pulled artifacts differ from dvc.lock; not running" >&2; exit 1; }
	$(BIN)/snakemake --profile profiles/local -n

clean:
	rm -rf results reports logs .snakemake/log .snakemake/incomplete
