#!/usr/bin/env bash
# Builds llama.cpp's own tools from the llama.cpp vendored in the pinned llama-cpp-python sdist, with the RPC backend,
# into the cache (once: about 6-8 minutes on 2 cores; then nothing to do): llama-server and ggml-rpc-server (the
# judges of the printed commands), llama-bench and llama-fit-params (the anchors of the benchmarks), llama-perplexity
# (the judge of a quality measurement) and llama-quantize (re-quantized real GGUFs for the tests).
# usage: [BACKEND=vulkan] scripts/build_llama_tools.sh [OUT_DIR]   (called by `make test`; prints the bin folder last)
# OUT_DIR defaults to ~/.cache/llama-tools/VERSION, where tests/support/llama_server.py (tools_dir()) looks for them;
# BACKEND=vulkan adds the Vulkan backend, into ~/.cache/llama-tools/VERSION-vulkan (llama_server.vulkan_tools_dir()), with the
# headers of ../shared/tools/setup_vulkan_lavapipe.sh where the system's are too old (as scripts/install_llama_cpp.sh).
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
V="$(sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' "$HERE/pyproject.toml" | head -1)"  # the one pin
BACKEND="${BACKEND:-cpu}"; EXTRA=()
case "$BACKEND" in
  cpu) SUFFIX="" ;;
  vulkan) SUFFIX="-vulkan"; EXTRA=(-DGGML_VULKAN=ON)
    INC="${VULKAN_INCLUDE_DIR:-/usr/include}"
    if ! grep -qs LayerSettingEXT "$INC/vulkan/vulkan_handles.hpp" && [ -f "$HERE/../shared/tools/setup_vulkan_lavapipe.sh" ]; then
      INC="$(bash "$HERE/../shared/tools/setup_vulkan_lavapipe.sh" | tail -1)"
    fi
    [ "$INC" = /usr/include ] || EXTRA+=("-DVulkan_INCLUDE_DIR=$INC") ;;
  *) echo "build_llama_tools.sh: BACKEND '$BACKEND' is not built here (cpu, vulkan)" >&2; exit 2 ;;
esac
OUT="${1:-$HOME/.cache/llama-tools/$V$SUFFIX}"
if [ -x "$OUT/bin/llama-server" ] && [ -x "$OUT/bin/ggml-rpc-server" ] && [ -x "$OUT/bin/llama-quantize" ]; then echo "$OUT/bin"; exit 0; fi
echo "building llama.cpp's tools (llama-server, ggml-rpc-server, llama-bench, llama-fit-params, llama-perplexity, llama-quantize) from llama-cpp-python $V into $OUT, once (about 6-8 minutes)" >&2
mkdir -p "$OUT"; cd "$OUT"
if [ ! -d "llama_cpp_python-$V" ]; then
  "${PYTHON:-python3}" -m pip download -q --no-deps --no-binary :all: -d . "llama-cpp-python==$V" >&2
  tar xzf "llama_cpp_python-$V.tar.gz"
fi
cmake -S "llama_cpp_python-$V/vendor/llama.cpp" -B build -DCMAKE_BUILD_TYPE=Release -DGGML_RPC=ON \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF "${EXTRA[@]}" >/dev/null
cmake --build build --target llama-bench llama-fit-params ggml-rpc-server llama-server llama-perplexity llama-quantize -j"$(nproc)" >/dev/null
mkdir -p bin.partial && cp -a build/bin/* bin.partial/ && rm -rf bin && mv bin.partial bin
echo "$OUT/bin"
