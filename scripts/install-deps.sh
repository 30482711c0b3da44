#!/usr/bin/env bash
# Installs the Debian packages rckpt needs to build and test, when missing.
# Run as root (or with sudo) on Debian 12.
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libzstd-dev libflatbuffers-dev flatbuffers-compiler
      libgtest-dev libgmock-dev libxxhash-dev python3
      clang libclang-rt-14-dev  # clang + libFuzzer for the fuzz stage of scripts/test.sh
      libopenmpi-dev openmpi-bin)  # rckpt::distributed and its mpi-labelled tests
pkgs+=("$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
