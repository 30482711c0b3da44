#!/usr/bin/env bash
# Prepares a Python interpreter for the tests and prints its path.
#
#   python-env.sh [VENV]           Debian's python3-torch (1.13) and numpy
#       (install-deps.sh) plus safetensors, nanobind, scikit-build-core,
#       pytest and mypy (the type check of scripts/test.sh) from PyPI, in a
#       venv that sees the system packages (default build/pyenv). When PyPI
#       cannot be reached the venv still has torch; the safetensors checks
#       skip with a visible reason, and without nanobind the Python package is
#       not built (the configure step says so).
#
#   python-env.sh --torch2 [VENV]  the newest torch 2.x PyPI serves, numpy 2,
#       safetensors, pytest, lightning, tensorizer, botocore (the S3 suites'
#       credential hand-over), hippynn 0.1.3 (the
#       hippynn restart test), transformers 5.23 and accelerate 1.16 (the
#       Trainer and accelerate resume tests; transformers 5.25 cannot build
#       models offline), all from PyPI (no
#       mpi4py: the mpirun runs are the Debian venv's; torch 2's are the
#       torchrun ones), in a venv of
#       /usr/bin/python3 (the interpreter the extension is built for) that
#       does not see the system packages. Default VENV:
#       ${XDG_CACHE_HOME:-~/.cache}/rckpt/venv-torch2-py<X.Y>, outside the
#       clone, so that every clone on the machine reuses it: a venv whose
#       packages import is used as it is (delete it to get a newer torch); one
#       that lacks a package (an older venv without hippynn) gets it installed.
#       Exit status 3, with the reason on stderr, when the venv needs
#       packages and PyPI cannot be reached.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

torch2_venv() {
  local python=/usr/bin/python3 version venv pip_install
  version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  venv="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/rckpt/venv-torch2-py$version}"
  local modules="torch numpy safetensors pytest lightning tensorizer hippynn botocore"
  local packages=("torch>=2" "numpy>=2" safetensors pytest lightning tensorizer botocore
                  "hippynn==0.1.3"
                  "transformers==5.23.*" "accelerate==1.16.*")
  # transformers and accelerate are looked up, not imported (seconds each).
  local check="import $(echo "$modules" | tr ' ' ','), importlib.util, sys
sys.exit(int(torch.__version__.split('.')[0]) < 2 or int(numpy.__version__.split('.')[0]) < 2
         or not all(importlib.util.find_spec(m) for m in ('transformers', 'accelerate')))"
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo "$venv/bin/python"
    return
  fi
  if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$(dirname "$venv")"
    "$python" -m venv "$venv" >&2
  fi
  # --no-compile: bytecode is written when a module is first imported, not for
  # all of torch's files at install.
  pip_install=("$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir --no-compile)
  # One small request first: an unreachable index is a skip, not a failure.
  local probe
  if ! probe="$("$venv/bin/pip" download -q --disable-pip-version-check --no-cache-dir --retries 1 \
                  --timeout 15 --no-deps -d "$venv/probe" pytest 2>&1)"; then
    local cause
    cause="$(echo "$probe" | grep -o '\[Errno [^]]*\][^'"'"')]*' | head -1)"
    [ -n "$cause" ] || cause="$(echo "$probe" | grep -v '^\s*$' | tail -1)"
    echo "python-env: PyPI cannot be reached (pip download pytest: $cause)" >&2
    exit 3
  fi
  rm -rf "$venv/probe"
  echo "python-env: installing ${packages[*]} into $venv (torch with its CUDA libraries: a few GiB)" >&2
  "${pip_install[@]}" "${packages[@]}" >&2
  "$venv/bin/python" -c "$check" >&2
  echo "$venv/bin/python"
}

if [ "${1:-}" = --torch2 ]; then
  shift
  torch2_venv "$@"
  exit 0
fi

venv="${1:-$root/build/pyenv}"
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv" >&2
fi
if ! "$venv/bin/python" -c "import safetensors" 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check safetensors >&2 ||
    echo "python-env: could not install safetensors from PyPI; its checks will be skipped" >&2
fi
for module in nanobind scikit_build_core pytest mypy; do
  if ! "$venv/bin/python" -c "import $module" 2>/dev/null; then
    "$venv/bin/pip" install -q --disable-pip-version-check "${module//_/-}" >&2 ||
      echo "python-env: could not install $module from PyPI" >&2
  fi
done
echo "$venv/bin/python"
