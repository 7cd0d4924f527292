# Two commands on a fresh machine:  `make run` (offline default)  and  `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run report ablations scaling test test-fast bench lint share fetch clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[workflow,test]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/snakemake --profile profiles/local
	$(BIN)/snakemake --profile profiles/local --report reports/report.html

report: setup
	$(BIN)/snakemake --profile profiles/local --report reports/report.html

# CReL Appendix C (ablations) and Appendix E (calibration runtime scaling): separate targets,
# each then rebuilds the report with its tables and figures beside Table 1's.
ablations: setup
	$(BIN)/snakemake --profile profiles/local ablations
	$(BIN)/snakemake --profile profiles/local --report reports/report.html all ablations

scaling: setup
	$(BIN)/snakemake --profile profiles/local scaling
	$(BIN)/snakemake --profile profiles/local --report reports/report.html all scaling

# tests/workflow/test_slurm.py runs the workflow on a localhost SLURM cluster: root, and Debian's packages.
test: setup slurm-deps
	$(BIN)/pytest

.PHONY: slurm-deps
slurm-deps:
	bash tools/slurm-localhost.sh install

test-fast: setup
	$(BIN)/pytest -m "not slow"

bench: setup
	$(BIN)/python benchmarks/bench_calibration.py --out benchmarks/out/calibration.json

lint: setup
	$(BIN)/snakemake --lint

# Share a run with the lab: DVC tracks data/, results/ and reports/; git keeps the pointers
# and .snakemake/metadata so that a colleague's `make fetch` finds "Nothing to be done".
share: setup
	$(BIN)/dvc add data results reports
	$(BIN)/dvc push
	git add data.dvc results.dvc reports.dvc .snakemake/metadata

fetch: setup
	$(BIN)/dvc pull
	$(BIN)/snakemake --profile profiles/local -n

clean:
	rm -rf results reports logs .snakemake/log .snakemake/incomplete
