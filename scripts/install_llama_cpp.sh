#!/usr/bin/env bash
# Installs llama-cpp-python 0.3.36 into a venv with the asked llama.cpp backend beside RPC, and checks it.
# usage: scripts/install_llama_cpp.sh BACKEND PYTHON [--first]   (BACKEND: cpu, cuda, vulkan, metal; called by `make install`,
#        once with --first before the package is installed: a GPU backend is built then, so pip keeps it; cpu waits)
# pip's wheel cache does not key on CMAKE_ARGS: a GPU backend is built with --no-cache-dir, never taken from the cache,
# and the installed lib/ must then hold that backend's library, or this fails loudly. A GPU build also serves as the CPU
# build (with no GPU visible, llama.cpp runs on the CPU), so the cpu backend keeps any build that has RPC.
# Vulkan: Debian 12's headers (1.3.239) are older than ggml-vulkan needs (vk::LayerSettingEXT); where they are, the newer
# headers of ../shared/tools/setup_vulkan_lavapipe.sh are used (it also installs Mesa's software device, lavapipe).
set -euo pipefail
BACKEND="$1"; PY="$2"; FIRST="${3:-}"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="$(sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' "$HERE/pyproject.toml" | head -1)"  # the one pin
case "$BACKEND" in
  cpu)    ARGS="-DGGML_RPC=on"; LIB="" ;;
  cuda)   ARGS="-DGGML_RPC=on -DGGML_CUDA=on"; LIB="libggml-cuda" ;;
  vulkan) ARGS="-DGGML_RPC=on -DGGML_VULKAN=on"; LIB="libggml-vulkan" ;;
  metal)  ARGS="-DGGML_RPC=on -DGGML_METAL=on"; LIB="libggml-metal" ;;
  *) echo "install_llama_cpp.sh: unknown BACKEND '$BACKEND' (cpu, cuda, vulkan, metal)" >&2; exit 2 ;;
esac
libdir() { "$PY" -c 'import importlib.util, pathlib; s = importlib.util.find_spec("llama_cpp"); print(pathlib.Path(s.origin).parent / "lib" if s else "")'; }
has() { local d; d="$(libdir)"; [ -n "$d" ] && ls "$d" 2>/dev/null | grep -q "^$1\."; }

if [ "$BACKEND" != cpu ] && has "$LIB" && has libggml-rpc; then exit 0; fi  # built already: nothing to check

if [ "$BACKEND" = vulkan ]; then
  SETUP="$HERE/../shared/tools/setup_vulkan_lavapipe.sh"
  fresh() { grep -qs LayerSettingEXT "$1/vulkan/vulkan_handles.hpp"; }
  INC="${VULKAN_INCLUDE_DIR:-/usr/include}"
  if ! command -v glslc >/dev/null 2>&1 || ! fresh "$INC"; then
    if [ -f "$SETUP" ]; then INC="$(bash "$SETUP" | tail -1)"; fi
  fi
  if ! command -v glslc >/dev/null 2>&1 || ! fresh "$INC"; then
    echo "install_llama_cpp.sh: the Vulkan build needs glslc and Vulkan headers 1.3.261 or newer (those in $INC are older): apt-get install libvulkan-dev glslc spirv-headers mesa-vulkan-drivers on Ubuntu 24.04+ / Debian 13+, or set VULKAN_INCLUDE_DIR to newer headers" >&2
    exit 1
  fi
  [ "$INC" = /usr/include ] || ARGS="$ARGS -DVulkan_INCLUDE_DIR=$INC"
fi

if [ "$BACKEND" = cpu ]; then
  if [ "$FIRST" = --first ] || has libggml-rpc; then exit 0; fi  # the wheel pip installed (from its cache, or a GPU build) already has RPC
  echo "rebuilding llama-cpp-python $VERSION with $ARGS, bypassing pip's wheel cache (about 9 minutes)"
else
  echo "building llama-cpp-python $VERSION with $ARGS, bypassing pip's wheel cache (10-20 minutes)"
fi
CMAKE_ARGS="$ARGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$PY" -m pip install -q --no-cache-dir \
  --force-reinstall --no-deps --no-binary llama-cpp-python "llama-cpp-python==$VERSION"
for need in libggml-rpc $LIB; do
  if ! has "$need"; then
    echo "install_llama_cpp.sh: the installed llama-cpp-python has no $need in $(libdir): the $BACKEND build failed" >&2
    exit 1
  fi
done
echo "llama-cpp-python $VERSION installed with $ARGS ($(libdir))"
