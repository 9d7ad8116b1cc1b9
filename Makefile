# Quick start: `make demo` and `make test`. Each creates .venv on first use.
# llama-cpp-python is compiled from source with the RPC backend (an emulated card on 127.0.0.1);
# BACKEND=cuda (or vulkan, metal) adds that GPU backend, e.g. `make demo BACKEND=cuda`.
PYTHON  ?= python3
BACKEND ?= cpu
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-$(BACKEND)
comma    := ,
EXTRAS   := $(if $(filter cuda,$(BACKEND)),test$(comma)gpu,test)

.PHONY: demo test test-fast lint tools install clean

$(STAMP): pyproject.toml scripts/install_llama_cpp.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# a GPU backend first, built past pip's wheel cache (which does not key on CMAKE_ARGS); the package then keeps it
	bash scripts/install_llama_cpp.sh $(BACKEND) $(PY) --first
	CMAKE_ARGS="-DGGML_RPC=on" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(PY) -m pip install -q -e '.[$(EXTRAS)]'
	@# then checked in the installed lib/ (the CPU build is rebuilt where the cached wheel has no RPC)
	bash scripts/install_llama_cpp.sh $(BACKEND) $(PY)
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/llamabench demo

test: $(STAMP) tools
	$(PY) -m pytest --durations=15

test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow" --durations=15

# llama.cpp's own llama-server and ggml-rpc-server, the judges of the printed commands: built once into the cache;
# then its Vulkan build (Mesa's lavapipe device), the judge of a GPU backend's op offload, where it can be built
tools:
	bash scripts/build_llama_tools.sh >/dev/null
	BACKEND=vulkan bash scripts/build_llama_tools.sh >/dev/null || echo "the Vulkan tools could not be built here: the Vulkan judges skip, saying why" >&2

lint: $(STAMP)
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
