#!/usr/bin/env bash
# rckpt::torch, the adapter for libtorch programs (torch/, docs/CPP.md), built
# and tested against the libtorch of the torch 2 wheel that
# `scripts/python-env.sh --torch2` caches, so the main build never compiles
# libtorch:
#   1. the default build installed into BUILD/libtorch/prefix;
#   2. the adapter built as a project of its own against that installation
#      (torch/CMakeLists.txt) and installed into it;
#   3. its tests and examples built against the installation, as a user's
#      project is (torch/tests: find_package(rckpt COMPONENTS torch));
#   4. the C++ tests, then Python against the examples (torch/tests/test_interop.py).
#
#   test-libtorch.sh [BUILD]     BUILD: the default build (default build/)
#
# PYTHON names the torch 2 interpreter (default: the cached venv of
# python-env.sh --torch2); without one this prints SKIPPED and the reason,
# and exits 0. OTHER_PYTHON names a second one, with another torch (test.sh
# gives Debian's torch 1.13), that resumes a C++ run and is resumed by C++. The wheel's C++ ABI (torch._C._GLIBCXX_USE_CXX11_ABI) is
# checked against the installed library's; when they differ, rckpt's library
# is built again with the wheel's ABI for the adapter.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
out="$build/libtorch"
t0=$(date +%s)

py="${PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/rckpt/venv-torch2-py$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')/bin/python}"
if [ ! -x "$py" ] || ! "$py" -c "import torch, pytest" 2>/dev/null; then
  echo "libtorch adapter: SKIPPED: no Python with torch 2 and pytest at $py (scripts/python-env.sh --torch2 makes it; PYTHON names another)"
  exit 0
fi
torch_version="$("$py" -c 'import torch; print(torch.__version__)')"
torch_cmake="$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
torch_abi="$("$py" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')"
echo "libtorch adapter: torch $torch_version ($torch_cmake), C++ ABI $torch_abi"
[ -x "$build/tools/rckpt" ] || { echo "test-libtorch: no $build/tools/rckpt: build it first" >&2; exit 1; }
if [ ! -f "$build/python/rckpt/__init__.py" ]; then
  echo "libtorch adapter: SKIPPED: the Python package was not built in $build (its tests run Python against C++)"
  exit 0
fi

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# No CUDA toolkit is looked for, whether or not the machine has one: nothing
# here compiles CUDA (cmake/RckptTorch.cmake). Release (-O3) with -Werror, as
# test.sh's default build builds the main project's targets: GCC 12 warns at
# -O3 where it does not at -O2.
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DRCKPT_WERROR=ON "${launcher[@]}")

prefix="$out/prefix"
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
rckpt_abi="$(sed -n 's/^set(RCKPT_CXX11_ABI "\(.*\)")$/\1/p' "$prefix/lib/cmake/rckpt/rckptConfig.cmake")"
if [ -n "$rckpt_abi" ] && [ "$rckpt_abi" != "$torch_abi" ]; then
  # The adapter's own configure refuses the mismatch (cmake/RckptTorch.cmake);
  # the library alone, with the wheel's ABI, is what it needs here.
  echo "libtorch adapter: the default build's C++ ABI is $rckpt_abi, the wheel's $torch_abi:" \
       "building rckpt's library with _GLIBCXX_USE_CXX11_ABI=$torch_abi for the adapter"
  cmake -S "$root" -B "$out/rckpt-abi$torch_abi" "${common[@]}" \
    -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$torch_abi" -DRCKPT_BUILD_TESTS=OFF \
    -DRCKPT_BUILD_TOOLS=OFF -DRCKPT_BUILD_EXAMPLES=OFF -DRCKPT_BUILD_BENCH=OFF \
    -DRCKPT_BUILD_PYTHON=OFF -DRCKPT_ENABLE_MPI=OFF >/dev/null
  cmake --build "$out/rckpt-abi$torch_abi" --target rckpt
  rm -rf "$prefix"
  cmake --install "$out/rckpt-abi$torch_abi" --prefix "$prefix" >/dev/null
fi

echo "libtorch adapter: a libtorch of another C++ ABI is refused (cmake -P)"
cmake -P "$root/torch/tests/abi_check.cmake"

echo "libtorch adapter: building rckpt::torch against the installation ($(( $(date +%s) - t0 )) s)"
cmake -S "$root/torch" -B "$out/adapter" "${common[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix;$torch_cmake" -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build "$out/adapter"
cmake --install "$out/adapter" >/dev/null

echo "libtorch adapter: building its tests and the examples ($(( $(date +%s) - t0 )) s)"
cmake -S "$root/torch/tests" -B "$out/tests" "${common[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix;$torch_cmake" >/dev/null
cmake --build "$out/tests"

echo "libtorch adapter: C++ tests ($(( $(date +%s) - t0 )) s)"
"$out/tests/rckpt_torch_tests" --gtest_brief=1
echo "libtorch adapter: Python against the examples ($(( $(date +%s) - t0 )) s)"
PYTHONPATH="$build/python" RCKPT_CLI="$build/tools/rckpt" RCKPT_TORCH_EXAMPLES="$out/tests/examples" \
  RCKPT_TORCH_OTHER_PYTHON="${OTHER_PYTHON:-}" \
  "$py" -m pytest -q -ra -p no:cacheprovider "$root/torch/tests/test_interop.py"
echo "libtorch adapter: passed in $(( $(date +%s) - t0 )) s"
