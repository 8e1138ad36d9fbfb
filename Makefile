# Set-up lives here: `make test` and `make train` work from a fresh clone.
PYTHON      ?= python3
VENV        ?= .venv
PY          := $(VENV)/bin/python
PIP         := $(PY) -m pip
TORCH_SPEC  ?= torch==2.13.0
STAMP       := $(VENV)/.installed
NATIVE      := $(shell find csrc -name '*.cpp' -o -name '*.h' -o -name '*.cu')
EXT_STAMP   := $(VENV)/.native-built
export OMP_NUM_THREADS ?= 2
# pytest-xdist workers for `make test`: two suit a 2-core host (most multi-rank tests wait on
# deadlines, sockets and subprocesses more than they compute); 0 runs the suite in one process
TEST_WORKERS ?= 2

.PHONY: install native train test test-fast lint bench bench-quick compare docs clean sparse \
        gpu-wheels gpu-check

install: $(STAMP) $(EXT_STAMP)

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# torch first, and only when absent: a dependency must never pull another (CUDA) build.
$(STAMP): $(VENV)/bin/python pyproject.toml setup.py
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install "$(TORCH_SPEC)"
	GNNSCALE_SKIP_NATIVE=1 $(PIP) install --no-build-isolation -e ".[test]"
	@$(PY) -c "import torch; print('torch', torch.__version__)"
	touch $@

# The native ops, compiled against the installed torch (gnnscale/native.py: every csrc/ file in
# one translation unit, ~25 s of one core; moved into gnnscale/ in one rename). Skipped while
# nothing in csrc/ changed; without a compiler gnnscale runs its torch-only ops (one line says so).
$(EXT_STAMP): $(STAMP) $(NATIVE) gnnscale/native.py
	$(PY) -m gnnscale.native build && touch $@ || echo "gnnscale: no native build; the torch-only ops run"

native: $(EXT_STAMP)

train: install
	$(PY) train.py $(ARGS)

test: install
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

test-fast: install
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not slow" $(PYTEST_ARGS)

lint: install
	$(PY) -m ruff check gnnscale benchmarks tests scripts train.py setup.py
	$(PY) -m pytest -q tests/test_typecheck.py  # mypy ([tool.mypy]) against tests/mypy_baseline.json

bench: install
	$(PY) -m benchmarks all --out bench-results

bench-quick: install
	$(PY) -m benchmarks all --quick --out bench-results

# Every strategy on one config at the quick size (a Hydra sweep, one run folder each), then
# one table + figure (scripts/compare.py). COMPARE_HW=<configs/hardware name> adds a modelled
# epoch time on that hardware.
COMPARE_STRATEGIES ?= data,split,factored,fullgraph,offload
COMPARE_DIR        ?= outputs/compare-quick
COMPARE_ARGS       ?= dataset.preset=small dataset.scale=0.2 model.hidden=64 model.num_layers=2 \
                      'sampler.fanouts=[10,10]' epochs=5 dist.world_size=2
COMPARE_HW         ?=
compare: install
	rm -rf $(COMPARE_DIR)
	$(PY) train.py -m strategy=$(COMPARE_STRATEGIES) $(COMPARE_ARGS) progress=false \
	    checkpoint=false hydra.sweep.dir=$(COMPARE_DIR) hydra.sweep.subdir='$${hydra.job.num}'
	$(PY) scripts/compare.py $(COMPARE_DIR)/[0-9]* --out $(COMPARE_DIR)/compare \
	    $(if $(COMPARE_HW),--hardware $(COMPARE_HW))

# Optional: torch-scatter + torch-sparse compiled from source (tens of minutes on 2 cores);
# they enable the PyG baselines of the sampler and epoch benchmark suites.
sparse: install
	$(PIP) install --no-build-isolation torch-scatter torch-sparse

# The docs' figures from the benchmark JSON in docs/results.
docs: install
	$(PY) scripts/plots.py docs/results docs/img

# The prepared GPU check (docs/gpu.md). `make gpu-wheels` here, where pip reaches PyPI: the
# packages the lent GPU machine lacks, as wheels for its Python 3.12 (antlr4's runtime has no
# wheel on PyPI: built here, pure Python). `make gpu-check` there (GPU_ARGS=--quick: < 3 min):
# no venv, no network; it runs that machine's own python3 (this venv's where one exists).
GPU_WHEELS  ?= .gpu-wheels
GPU_PY      ?= $(if $(wildcard $(PY)),$(PY),python3)
GPU_ARGS    ?=
GPU_PIP_PLATFORMS := $(foreach p,manylinux_2_28_x86_64 manylinux_2_24_x86_64 \
                       manylinux_2_17_x86_64 manylinux2014_x86_64,--platform $(p))
gpu-wheels:
	mkdir -p $(GPU_WHEELS)
	$(PYTHON) -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
	    --implementation cp $(GPU_PIP_PLATFORMS) -d $(GPU_WHEELS) \
	    hydra-core==1.3.8 omegaconf==2.3.1 pymetis==2025.2.2
	$(PYTHON) -m pip wheel --no-deps -w $(GPU_WHEELS) antlr4-python3-runtime==4.9.3

gpu-check:
	$(GPU_PY) scripts/gpu_check.py --wheels $(GPU_WHEELS) $(GPU_ARGS)

clean:
	rm -rf build gnnscale/_C*.so $(EXT_STAMP)
