#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds and runs a consumer
# project with find_package(rckpt) and, separately, with pkg-config.
set -euo pipefail
build="$1"; src="$2"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -x "$tmp/prefix/bin/rckpt"
test -f "$tmp/prefix/include/rckpt/io.h"
# The installed headers are the library's API: each compiles on its own
# against the installed tree, and none declares a CLI or test-only seam.
for h in "$tmp/prefix/include/rckpt/"*.h; do
  flags=()
  if [ "$(basename "$h")" = mpi.h ]; then
    # Open MPI's own headers are the system's: their warnings are not ours.
    for d in $(mpicxx --showme:incdirs); do flags+=(-isystem "$d"); done
  fi
  echo "#include \"rckpt/$(basename "$h")\"" |
    c++ -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I "$tmp/prefix/include" "${flags[@]}" -x c++ -
done
test ! -e "$tmp/prefix/include/rckpt/tools.h"
if grep -l "ForTesting\|MemFileSystem\|fail_after\|ExitCodeFor\|Render\(Inspect\|Plan\|Load\|Diff\)" "$tmp/prefix/include/rckpt/"*.h; then
  echo "install: a CLI or test-only declaration is in the installed headers" >&2
  exit 1
fi
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer" "$tmp/ck.rckpt"
"$tmp/prefix/bin/rckpt" verify "$tmp/ck.rckpt"
if [ -f "$tmp/prefix/include/rckpt/mpi.h" ]; then
  # Built with MPI: rckpt::mpi is installed and exported too.
  test -x "$tmp/consumer/distributed_consumer"
  as_root=(); [ "$(id -u)" = 0 ] && as_root=(--allow-run-as-root)
  mpirun --oversubscribe "${as_root[@]}" -np 2 "$tmp/consumer/distributed_consumer" "$tmp/sharded.rckpt"
  "$tmp/prefix/bin/rckpt" verify "$tmp/sharded.rckpt"
fi
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs rckpt | grep -q -- "-lrckpt"
echo "install: find_package(rckpt) (with rckpt::mpi where MPI is) and pkg-config work"
