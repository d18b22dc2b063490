# labelfree-seg-eval: `make run` sets up and runs the default experiment; `make test` sets up and runs the tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SNAKEMAKE := $(VENV)/bin/snakemake
CORES ?= 2
PROFILE ?= workflow/profiles/local
SNAKEMAKE_ARGS ?=
# CONFIG=my.yaml runs the workflow on that file alone, on every profile: the Snakefile reads config.yaml only when
# no --configfile is given, so nothing of the demo's entries is merged in, by this process or by a job it submits
CONFIG ?=
CONFIG_ARGS := $(if $(CONFIG),--configfile $(CONFIG))
# `make test`'s pytest-xdist workers (a module's tests run on one): one per CPU by default; TEST_WORKERS=0 runs
# the suite in this process
TEST_WORKERS ?= auto
SMK = $(SNAKEMAKE) --profile $(PROFILE) --cores $(CORES) $(CONFIG_ARGS)

.PHONY: setup run dry-run features tables unlock report verify test check check-inputs lint docs reference bench subset slurm-test clean help

help:
	@echo "make run        set up, then run the whole workflow on config.yaml (the embedded demo as shipped);"
	@echo "                make run CONFIG=my.yaml runs it on my.yaml alone"
	@echo "make test       set up, then run the test suite"
	@echo "make check      validate config.yaml (or CONFIG=my.yaml) without running it, and print what it costs:"
	@echo "                jobs per rule, features on disk, label openings against each sealed budget"
	@echo "make check-inputs  the bad-input test matrix alone (pytest -m badinput)"
	@echo "make lint       snakemake --lint (only the software-environment finding allowed) and snakefmt --check"
	@echo "make docs       the documentation site into site/ (mkdocs build --strict: a broken link fails it)"
	@echo "make reference  docs/configuration.md rewritten from workflow/schemas/config.schema.yaml"
	@echo "make dry-run    list the jobs that would run"
	@echo "make tables     regenerate tables and figures from the ledger"
	@echo "make report     results/snakemake-report.html (Snakemake's HTML report; results/report.html is ours)"
	@echo "make verify     check the openings hash chain and every record"
	@echo "make unlock     release Snakemake's lock after a killed run (then make run resumes)"
	@echo "make bench      every speed benchmark in bench/ (one needing ../shared/data skips where it is absent)"
	@echo "make subset     SOURCE=instances_train2017.json IMAGES=500 [SEED=0] OUT=instances_train_subset.json:"
	@echo "                a seeded, category-balanced subset of a COCO instances file"
	@echo "make slurm-test run the demo through a real single-node SLURM (needs root; installs Debian packages)"

# The CPU wheel of torch 2.13.0 is installed first and on its own, so that nothing pulls a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test,slurm,docs]'
	$(PY) -m pip install --quiet --no-deps pysodmetrics==1.6.2  # its numpy pin cannot be met: see pyproject.toml
	touch $@

setup: $(VENV)/.installed

run: setup
	$(SMK) $(SNAKEMAKE_ARGS)
	$(SMK) --report results/snakemake-report.html

dry-run: setup
	$(SMK) --dry-run

features: setup
	$(SMK) features

# Only the ledger's rules may run: features, masks and records are taken as they are, even if code changed.
tables: setup
	$(SMK) --allowed-rules scores tables figures html_report \
	    --forcerun scores tables figures html_report -- scores tables figures results/report.html

# After a killed run Snakemake keeps its lock on the working directory; this releases it (outputs stay).
unlock: setup
	$(SMK) --unlock

report: setup
	$(SMK) --report results/snakemake-report.html

verify: setup
	$(PY) -m evaluate.ledger verify results/ledger

test: setup
	$(PY) -m pytest -q -rs --durations=30 -n $(TEST_WORKERS) --dist loadscope

lint: setup
	$(PY) .ci/lint.py $(SNAKEMAKE)
	$(VENV)/bin/snakefmt --check Snakefile workflow/rules/*.smk

# The home page is generated while the site builds (docs/config_reference.py); the configuration reference is
# committed (its links work in the repository) and rewritten from the schema by `make reference`.
reference: setup
	$(PY) docs/config_reference.py > docs/configuration.md.tmp && mv docs/configuration.md.tmp docs/configuration.md

docs: setup
	$(PY) -m mkdocs build --strict --site-dir site

# The experiment validated without running it: jobs per rule, disk, and label openings against each sealed budget.
check: setup
	$(PY) -m evaluate.check $(if $(CONFIG),$(CONFIG),config.yaml)

check-inputs: setup
	$(PY) -m pytest -q -rs -m badinput

# Every bench of bench/ (tests/test_bench_skips.py checks the list): those that need ../shared/data say so and skip.
# The long ones: memory.py runs the workflow twice, precision.py extracts with every precision.
BENCHES := extract decode probe attention attention_masks discovery saliency semseg video scale precision memory
bench: setup
	@set -e; for b in $(BENCHES); do echo "== bench/$$b.py"; $(PY) bench/$$b.py; done

# A seeded, category-balanced subset of a COCO instances file (evaluate/datasets/subset.py), e.g. the COCO example's
# train subset: make subset SOURCE=data/coco/annotations/instances_train2017.json IMAGES=500 SEED=0 \
#   OUT=data/coco/annotations/instances_train_subset.json
SEED ?= 0
subset: setup
	$(PY) -m evaluate.datasets.subset $(SOURCE) --images $(IMAGES) --seed $(SEED) -o $(OUT)

slurm-test: setup
	bash workflow/profiles/slurm/slurm-test.sh

clean:
	rm -rf .snakemake logs benchmarks results/demo results/datasets results/features results/decoder \
	       results/probe results/ledger results/tables results/figures results/report.html \
	       results/snakemake-report.html
