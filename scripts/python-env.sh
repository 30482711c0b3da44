#!/usr/bin/env bash
# Prepares the Python interpreter the interoperability tests and the Python
# package use: Debian's python3-torch and numpy (installed by
# install-deps.sh) plus safetensors, nanobind, scikit-build-core, pytest and
# mypy (the type check of scripts/test.sh)
# from PyPI in a venv that sees the system packages. Prints the
# interpreter's path. When PyPI cannot be reached the venv still has torch;
# the safetensors checks skip with a visible reason, and without nanobind
# the Python package is not built (the configure step says so).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
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
