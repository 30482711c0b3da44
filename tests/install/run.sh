#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds and runs a consumer
# project with find_package(rckpt) and, separately, with pkg-config.
set -euo pipefail
build="$1"; src="$2"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -x "$tmp/prefix/bin/rckpt"
test -f "$tmp/prefix/include/rckpt/io.h"
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer" "$tmp/ck.rckpt"
"$tmp/prefix/bin/rckpt" verify "$tmp/ck.rckpt"
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs rckpt | grep -q -- "-lrckpt"
echo "install: find_package(rckpt) and pkg-config both work"
