#!/usr/bin/env bash
# Installs the Debian packages rckpt needs, when missing. Run as root (or with
# sudo) on Debian 12.
#
#   scripts/install-deps.sh [--pip] [--dry-run] [PACKAGE...]
#
# Without --pip: what building and testing everything needs (scripts/test.sh):
# the pip set below plus GoogleTest, clang with libFuzzer and the sanitizer
# runtimes, Open MPI, faketime and ccache.
# --pip: only what `pip install .` needs to build the package (the library,
#   the extension, the CLI): CMake, Ninja, a C++20 compiler, pkg-config, zstd,
#   xxhash, FlatBuffers, libcurl, OpenSSL and pugixml (S3), and Python's
#   headers, venv and pip. nanobind and
#   scikit-build-core come from PyPI during the install.
# --dry-run: print the set and what is missing from it; install nothing.
# PACKAGEs are added to the set (python3-torch for Debian's torch, ...).
# It always prints the set it checks and what it installs.
set -euo pipefail

usage() { sed -n '5p' "$0" | sed 's/^#   //' >&2; }

pip_only=0
dry_run=0
extra=()
for arg in "$@"; do
  case "$arg" in
    --pip) pip_only=1 ;;
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "install-deps: unknown option '$arg'" >&2; usage; exit 2 ;;
    *) extra+=("$arg") ;;
  esac
done

# What pip install . compiles and links against (libcurl, OpenSSL and pugixml:
# s3:// paths, docs/OBJECT_STORAGE.md).
pkgs=(cmake ninja-build g++ pkg-config libzstd-dev libflatbuffers-dev flatbuffers-compiler
      libxxhash-dev libcurl4-openssl-dev libssl-dev libpugixml-dev
      python3 python3-dev python3-venv python3-pip)
set_name="pip install ."
if [ "$pip_only" = 0 ]; then
  set_name="build and test"
  pkgs+=(libgtest-dev libgmock-dev          # the C++ tests
         clang libclang-rt-14-dev           # clang + libFuzzer for the fuzz stage of scripts/test.sh
         libopenmpi-dev openmpi-bin         # rckpt::distributed and its mpi-labelled tests
         faketime                           # the S3 stage's clock-skew test (a process 40 min off)
         ccache)                            # scripts/test.sh: pip's build finds the default build's objects
fi
pkgs+=("${extra[@]}")

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
echo "install-deps ($set_name): ${pkgs[*]}"
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all installed"
  exit 0
fi
if [ "$dry_run" = 1 ]; then
  echo "install-deps: would install: ${missing[*]}"
  exit 0
fi
echo "install-deps: installing: ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
