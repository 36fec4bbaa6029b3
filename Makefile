# The two commands of the README:
#   make demo   set up .venv, install rotmem, train RoMem and print MRR and example answers
#   make test   set up .venv, install rotmem, run ruff and the test suite (the tests marked slow excepted)
#   make test-slow   the tests marked slow (trainings, servers, compiles, the wheel); CI runs both
# CPU machines get the CPU build of torch (TORCH_CPU); a machine with an NVIDIA driver keeps a
# CUDA torch already in the venv or installs the default CUDA build (TORCH_CUDA).
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
TORCH_CPU ?= torch==2.13.0
TORCH_CUDA ?= torch
export ROTMEM_DATA_DIR ?= $(abspath ../shared/data)
# the native extension's sources: a change rebuilds it
CSRC := $(shell find csrc -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \))

.PHONY: setup demo test test-slow lint clean

# Everything the tests and the demo need: rotmem[dev] = [train] + [memory] + test tools. pip install -e
# builds the native extension, so a change in csrc/ reruns it.
$(VENV)/.installed: pyproject.toml setup.py $(CSRC)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -c "import torch" 2>/dev/null || \
	  if command -v nvidia-smi >/dev/null 2>&1; then $(PY) -m pip install -q "$(TORCH_CUDA)"; \
	  else $(PY) -m pip install -q "$(TORCH_CPU)"; fi
	$(PY) -m pip install -q --no-build-isolation -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/rotmem demo

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	$(PY) -m pytest -q -m "not slow"

test-slow: setup
	$(PY) -m pytest -q -m slow

clean:
	rm -rf $(VENV) build *.egg-info runs
