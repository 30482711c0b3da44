#!/usr/bin/env bash
# Makes the venv of the object-storage bench's peers (bench/s3_bench.py) and
# prints its python.
#
#   bench/peers/s3_peers_venv.sh [VENV]
#
# The peers: s3fs, s3torchconnector and Run:ai Model Streamer with its S3
# backend, pinned; boto3 at the version s3fs's aiobotocore allows;
# safetensors; torch 2 and numpy 2 under them. The DCP rows
# (bench/s3_dcp_bench.py) import s3torchconnector.dcp (which needs
# tenacity) and torch.distributed.checkpoint's fsspec storage (fsspec, from
# s3fs). Default VENV:
# ${XDG_CACHE_HOME:-~/.cache}/rckpt/venv-s3-peers-py<X.Y>, outside the clone.
# torch (a few GiB with its CUDA libraries) is not installed twice: when
# the torch 2 venv of scripts/python-env.sh --torch2 exists, this venv sees
# its packages through a .pth file (installed after, and shadowed by, its
# own), and that venv is not modified; without it, torch is installed here.
# A venv whose peers import is used as it is. Runs outside CI. Exit status 3,
# with the reason on stderr, when PyPI cannot be reached.
set -euo pipefail

python=/usr/bin/python3   # the interpreter rckpt's extension is built for
version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/rckpt"
venv="${1:-$cache/venv-s3-peers-py$version}"
torch2="$cache/venv-torch2-py$version"
peers=(boto3 "s3fs==2026.9.0" "s3torchconnector==1.5.0" "runai-model-streamer==0.17.1"
       "runai-model-streamer-s3==0.17.1" safetensors tenacity)
# What the benches import, each peer's S3 backend and plug-ins included.
check="import boto3, s3fs, s3torchconnector, s3torchconnector.dcp, tenacity, fsspec, \
runai_model_streamer, runai_model_streamer_s3, safetensors, torch, numpy, \
torch.distributed.checkpoint._fsspec_filesystem"

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv" >&2
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ -x "$torch2/bin/python" ] && "$torch2/bin/python" -c "import torch, numpy" 2>/dev/null; then
  torch2_site="$("$torch2/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$torch2_site" >"$site/rckpt-torch2-venv.pth"
  echo "s3_peers_venv: torch and numpy from $torch2 (a .pth file; that venv is not modified)" >&2
else
  peers+=("torch>=2" "numpy>=2")
  echo "s3_peers_venv: no torch 2 venv at $torch2: installing torch here (a few GiB)" >&2
fi
if ! probe="$("$venv/bin/pip" download -q --disable-pip-version-check --no-cache-dir --retries 1 \
                --timeout 15 --no-deps -d "$venv/probe" six 2>&1)"; then
  echo "s3_peers_venv: PyPI cannot be reached (pip download six: $(echo "$probe" | tail -1))" >&2
  exit 3
fi
rm -rf "$venv/probe"
echo "s3_peers_venv: installing ${peers[*]} into $venv" >&2
"$venv/bin/pip" install -q --disable-pip-version-check --no-compile "${peers[@]}" >&2
"$venv/bin/python" -c "$check" >&2
echo "$venv/bin/python"
