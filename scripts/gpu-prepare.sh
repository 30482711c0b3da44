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
#   lib/     the shared libraries they need besides glibc and libstdc++
#   deps/    headers, libraries, CMake package files and flatc, laid out as
#            under /usr, for building the Python extension there (it must be
#            built for that machine's Python and torch)
#   wheels/  hippynn 0.1.3 (no dependencies beyond torch and numpy)
# and checks that the work tree and gpu-carry/ together fit in the 64 MiB that
# travel (nothing else is carried: the proof builds in /tmp there).
# Prints the path to carry. Exit 3 when PyPI cannot be reached for hippynn
# (PYTHON names the interpreter whose pip downloads it; default python3).
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
# Their shared libraries beyond the C and C++ runtimes every Linux has.
for b in "$carry"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
    *) cp -L "$lib" "$carry/lib/" ;;
  esac
done

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
