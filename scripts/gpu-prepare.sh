#!/usr/bin/env bash
# Prepares what the GPU proof (tests/gpu/proof.sh) needs on the GPU test
# machine, which has nvcc, cmake, ninja and Python 3.12 with torch, numpy,
# safetensors, lightning, nanobind, scikit-build-core and pytest, but no
# network, no apt, and none of rckpt's C/C++ dependencies (zstd, FlatBuffers,
# xxHash, GoogleTest) nor hippynn.
#
#   scripts/gpu-prepare.sh [BUILD_DIR]
#
# BUILD_DIR (default build/) is a build of this tree as scripts/test.sh makes
# it. Writes gpu-carry/ at the repository root (ignored by git), which the
# proof's machine gets beside the work tree:
#   bin/     the C++ binaries the proof runs, built here (debug info stripped)
#   lib/     the shared libraries they and the extension need besides glibc
#            and libstdc++
#   python/  the rckpt package with its extension built here for CPython 3.12
#            (the GPU machine's Python): the extension links no torch (it
#            reaches torch through Python at run time), so one build serves
#            whatever torch that machine has, and the proof spends no device
#            time compiling. BUILT_WITH in it names the interpreter.
#   deps/    headers, libraries, CMake package files and flatc, laid out as
#            under /usr, for building the extension there when the carried one
#            does not fit that machine's Python (tests/gpu/README.md)
#   wheels/  hippynn 0.1.3 (no dependencies beyond torch and numpy)
# and checks that the work tree and gpu-carry/ together fit in the 64 MiB that
# travel (nothing else is carried: the proof works in /tmp there).
#
# The CPython 3.12 it builds with: PYTHON312 when set, else python3.12 on the
# PATH, else pyenv's (~/.pyenv/versions/3.12.*), else uv's (`uv python find
# 3.12`); nanobind (the version of PYTHON's) is installed from PyPI into a
# venv of it kept at ${XDG_CACHE_HOME:-~/.cache}/rckpt/venv-py3.12-nanobind.
# The build is build-gpu-py312/ beside BUILD_DIR: the extension's sources
# only (about 25 files), linked against BUILD_DIR's library
# (RCKPT_LIBRARY_FROM), through ccache when it exists.
# Prints the path to carry. Exit 3 when PyPI cannot be reached for hippynn or
# nanobind (PYTHON names the interpreter whose pip downloads hippynn; default
# python3), 4 when no CPython 3.12 is found.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
carry="$root/gpu-carry"
rm -rf "$carry"
mkdir -p "$carry/bin" "$carry/lib" "$carry/deps" "$carry/wheels"

# The binaries: the CLI, the C++ GPU suites, the demo they run, the
# throughput probe and the bench suite.
bins=(tools/rckpt tests/gpu/gpu_tests tests/restart/restart_gpu_tests examples/rckpt-train-demo
      tests/gpu/rckpt_gpu_throughput bench/rckpt-bench)
for b in "${bins[@]}"; do
  [ -x "$build/$b" ] || { echo "gpu-prepare: $build/$b is missing: build the tree first" >&2; exit 2; }
  objcopy --strip-debug "$build/$b" "$carry/bin/$(basename "$b")"
done
# copy_libs FILE...: the shared libraries the files need beyond the C and C++
# runtimes every Linux has, into lib/.
copy_libs() {
  for b in "$@"; do
    ldd "$b" | awk '/=> \// {print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
      *) cp -L "$lib" "$carry/lib/" ;;
    esac
  done
}
copy_libs "$carry"/bin/*

# What building the Python extension there takes, with /usr's layout so the
# CMake package files (which find their files relative to themselves) work.
# Plain copies: links do not travel.
copy_usr() {
  for f in "$@"; do
    mkdir -p "$carry/deps/$(dirname "$f")"
    cp -rL "/usr/$f" "$carry/deps/$f"
  done
}
arch="$(gcc -print-multiarch)"
copy_usr include/zstd.h include/zdict.h include/zstd_errors.h include/xxhash.h include/xxh3.h \
  include/flatbuffers bin/flatc \
  "lib/$arch/libzstd.a" "lib/$arch/libzstd.so.1.5.4" "lib/$arch/cmake/zstd" \
  "lib/$arch/libflatbuffers.a" "lib/$arch/libflatbuffers.so.2.0.8" "lib/$arch/cmake/flatbuffers" \
  "lib/$arch/libxxhash.a" "lib/$arch/libxxhash.so.0.8.1"
# The names the linker and the loader look for, as copies.
for pair in libzstd.so.1:libzstd.so.1.5.4 libzstd.so:libzstd.so.1.5.4 \
            libxxhash.so.0:libxxhash.so.0.8.1 libxxhash.so:libxxhash.so.0.8.1 \
            libflatbuffers.so.2:libflatbuffers.so.2.0.8; do
  cp "$carry/deps/lib/$arch/${pair#*:}" "$carry/deps/lib/$arch/${pair%%:*}"
done

# The extension for CPython 3.12, built here (see above).
find_python312() {
  local c
  for c in "${PYTHON312:-}" python3.12 "$HOME"/.pyenv/versions/3.12.*/bin/python3.12; do
    [ -n "$c" ] || continue
    if "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
      command -v "$c"
      return 0
    fi
  done
  if command -v uv >/dev/null && c="$(uv python find 3.12 2>/dev/null)"; then
    echo "$c"
    return 0
  fi
  return 1
}
if ! py312="$(find_python312)"; then
  echo "gpu-prepare: no CPython 3.12 here (PYTHON312, python3.12, pyenv's or uv's): the GPU" \
       "machine's extension cannot be built" >&2
  exit 4
fi
venv312="${XDG_CACHE_HOME:-$HOME/.cache}/rckpt/venv-py3.12-nanobind"
nb_version="$("${PYTHON:-python3}" -c 'import nanobind; print(nanobind.__version__)' 2>/dev/null || echo 2.4.0)"
if ! "$venv312/bin/python" -c "import nanobind, sys; sys.exit(nanobind.__version__ != '$nb_version')" 2>/dev/null; then
  rm -rf "$venv312"
  mkdir -p "$(dirname "$venv312")"
  "$py312" -m venv "$venv312"
  if ! pip_out="$("$venv312/bin/pip" install -q --disable-pip-version-check --retries 1 --timeout 30 \
                  "nanobind==$nb_version" 2>&1)"; then
    echo "gpu-prepare: PyPI cannot be reached for nanobind: $(echo "$pip_out" | tail -1)" >&2
    exit 3
  fi
fi
build312="$(dirname "$build")/build-gpu-py312"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# The extension's own sources, linked against BUILD_DIR's library (the one the
# carried binaries are made of), with BUILD_DIR's build type and warnings.
cached() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
build_type="$(cached CMAKE_BUILD_TYPE)"
t0=$(date +%s)
CCACHE_BASEDIR="$root" cmake -S "$root" -B "$build312" -G Ninja -DRCKPT_LIBRARY_FROM="$build" \
  -DCMAKE_BUILD_TYPE="${build_type:-Release}" -DRCKPT_WERROR="$(cached RCKPT_WERROR)" \
  "${launcher[@]}" -DRCKPT_PYTHON="$venv312/bin/python" -DRCKPT_BUILD_PYTHON=ON \
  -DRCKPT_BUILD_TESTS=OFF -DRCKPT_BUILD_TOOLS=OFF -DRCKPT_BUILD_EXAMPLES=OFF \
  -DRCKPT_BUILD_BENCH=OFF -DRCKPT_ENABLE_MPI=OFF >/dev/null
CCACHE_BASEDIR="$root" cmake --build "$build312" -j"$(nproc)" --target rckpt_python_package >/dev/null
mkdir -p "$carry/python"
cp -r "$build312/python/rckpt" "$carry/python/rckpt"
rm -rf "$carry/python/rckpt/__pycache__"
for so in "$carry"/python/rckpt/*.so; do objcopy --strip-debug "$so"; done
ls "$carry"/python/rckpt/_core.cpython-312-*.so >/dev/null
echo "$("$py312" -c 'import sys; print(sys.version.split()[0])') $py312" > "$carry/python/BUILT_WITH"
echo "gpu-prepare: the extension for CPython 3.12 in $(( $(date +%s) - t0 )) s ($py312)"
copy_libs "$carry"/python/rckpt/*.so

# hippynn's wheel, for the hippynn restart on the GPU.
if ! pip_out="$("${PYTHON:-python3}" -m pip download -q --disable-pip-version-check --no-deps --retries 1 \
                --timeout 30 -d "$carry/wheels" hippynn==0.1.3 2>&1)"; then
  echo "gpu-prepare: PyPI cannot be reached for hippynn's wheel: $(echo "$pip_out" | tail -1)" >&2
  exit 3
fi

# Everything that travels: the work tree (tracked and untracked files git
# does not ignore) and gpu-carry/.
tree_bytes="$(cd "$root" && git ls-files -co --exclude-standard -z |
              xargs -0 stat -c %s 2>/dev/null | awk '{n += $1} END {print n + 0}' || true)"
carry_bytes="$(du -sb "$carry" | cut -f1)"
total=$(( tree_bytes + carry_bytes ))
limit=$(( 64 << 20 ))
echo "gpu-prepare: gpu-carry/ $(( carry_bytes >> 20 )) MiB + work tree $(( tree_bytes >> 20 )) MiB =" \
     "$(( total >> 20 )) MiB of the 64 MiB that travel"
if [ "$total" -gt "$limit" ]; then
  echo "gpu-prepare: too large to carry" >&2
  exit 1
fi
# The one command for the device machine: gpu-carry is its only carried
# path; the proof keeps its build and checkpoints in /tmp and its results in
# $OUT, under a 240 s budget (a 300 s call leaves room to rerun it once).
echo "gpu-prepare: carry gpu-carry, then run: bash tests/gpu/proof.sh (timeout 300 s;" \
     "results.md, proof.log and JSON come back in \$OUT)"
