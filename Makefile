# labelfree-seg-eval: `make run` sets up and runs the default experiment; `make test` sets up and runs the tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SNAKEMAKE := $(VENV)/bin/snakemake
CORES ?= 2
PROFILE ?= workflow/profiles/local
SNAKEMAKE_ARGS ?=

.PHONY: setup run dry-run features tables unlock report verify test check bench slurm-test clean help

help:
	@echo "make run        set up, then run the whole workflow on config.yaml (the embedded demo as shipped)"
	@echo "make test       set up, then run the test suite"
	@echo "make check      the bad-input matrix alone"
	@echo "make dry-run    list the jobs that would run"
	@echo "make tables     regenerate tables and figures from the ledger"
	@echo "make report     results/report.html (Snakemake's HTML report)"
	@echo "make verify     check the openings hash chain and every record"
	@echo "make unlock     release Snakemake's lock after a killed run (then make run resumes)"
	@echo "make bench      the speed benchmarks in bench/"
	@echo "make slurm-test run the demo through a real single-node SLURM (needs root; installs Debian packages)"

# The CPU wheel of torch 2.13.0 is installed first and on its own, so that nothing pulls a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test,slurm]'
	touch $@

setup: $(VENV)/.installed

run: setup
	$(SNAKEMAKE) --profile $(PROFILE) --cores $(CORES) $(SNAKEMAKE_ARGS)
	$(SNAKEMAKE) --profile $(PROFILE) --cores $(CORES) --report results/report.html

dry-run: setup
	$(SNAKEMAKE) --profile $(PROFILE) --cores $(CORES) --dry-run

features: setup
	$(SNAKEMAKE) --profile $(PROFILE) --cores $(CORES) features

# Only the ledger's rules may run: features, masks and records are taken as they are, even if code changed.
tables: setup
	$(SNAKEMAKE) --profile $(PROFILE) --cores $(CORES) --allowed-rules scores tables figures \
	    --forcerun scores tables figures -- scores tables figures

# After a killed run Snakemake keeps its lock on the working directory; this releases it (outputs stay).
unlock: setup
	$(SNAKEMAKE) --profile $(PROFILE) --cores $(CORES) --unlock

report: setup
	$(SNAKEMAKE) --profile $(PROFILE) --cores $(CORES) --report results/report.html

verify: setup
	$(PY) -m evaluate.ledger verify results/ledger

test: setup
	$(PY) -m pytest -q -rs

check: setup
	$(PY) -m pytest -q -rs -m badinput

bench: setup
	$(PY) bench/extract.py
	$(PY) bench/decode.py
	$(PY) bench/probe.py
	$(PY) bench/memory.py
	$(PY) bench/scale.py

slurm-test: setup
	bash workflow/profiles/slurm/slurm-test.sh

clean:
	rm -rf .snakemake logs benchmarks results/demo results/datasets results/features results/decoder \
	       results/probe results/ledger results/tables results/figures results/report.html
