# Quick start: `make demo` and `make test`. Each creates .venv on first use.
# llama-cpp-python is compiled from source with the RPC backend (an emulated card on 127.0.0.1);
# BACKEND=cuda (or vulkan, metal) adds that GPU backend, e.g. `make demo BACKEND=cuda`.
PYTHON  ?= python3
BACKEND ?= cpu
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-$(BACKEND)
CMAKE_ARGS_cpu    := -DGGML_RPC=on
CMAKE_ARGS_cuda   := -DGGML_RPC=on -DGGML_CUDA=on
CMAKE_ARGS_vulkan := -DGGML_RPC=on -DGGML_VULKAN=on
CMAKE_ARGS_metal  := -DGGML_RPC=on -DGGML_METAL=on
comma    := ,
EXTRAS   := $(if $(filter cuda,$(BACKEND)),test$(comma)gpu,test)
LIBDIR   = $$($(PY) -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("llama_cpp").origin).parent / "lib")')

.PHONY: demo test test-fast install clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	CMAKE_ARGS="$(CMAKE_ARGS_$(BACKEND))" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(PY) -m pip install -q -e '.[$(EXTRAS)]'
	@# pip's wheel cache does not key on CMAKE_ARGS: rebuild when the cached wheel lacks the wanted backends
	@if [ ! -e "$(LIBDIR)/libggml-rpc.so" ] || { [ "$(BACKEND)" != cpu ] && ! ls "$(LIBDIR)" | grep -qi "$(BACKEND)"; }; then \
	  echo "rebuilding llama-cpp-python with $(CMAKE_ARGS_$(BACKEND)) (about 9 minutes)"; \
	  CMAKE_ARGS="$(CMAKE_ARGS_$(BACKEND))" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(PY) -m pip install -q \
	    --force-reinstall --no-deps --no-binary llama-cpp-python "llama-cpp-python==0.3.36"; fi
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/llamabench demo

test: $(STAMP)
	$(PY) -m pytest

test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow"

clean:
	rm -rf $(VENV) build *.egg-info
