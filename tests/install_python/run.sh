#!/usr/bin/env bash
# `pip install -v .` from the repository root into a fresh venv (it sees the
# system's torch, numpy and mpi4py), as README and docs/PYTHON.md say, then
# `import rckpt` and a small save/load from outside the source tree, and the
# rckpt CLI the wheel installs into the venv's bin/: its --help, and inspect
# and verify printing what this build's CLI prints for the same file.
# Arguments: the source dir, the interpreter to make the venv from, where the
# build found MPI, mpiexec (then the installed rckpt.distributed saves and
# loads on 2 ranks), and this build's CLI. The build requirements
# (scikit-build-core, nanobind) come from PyPI or pip's cache.
set -euo pipefail
src="$1"; python="$2"; mpiexec="${3:-}"; built_cli="$4"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$python" -m venv --system-site-packages "$tmp/venv"
if ! "$tmp/venv/bin/pip" install -v --disable-pip-version-check "$src" >"$tmp/pip.log" 2>&1; then
  cat "$tmp/pip.log"
  if grep -qE "Could not find a version that satisfies|Failed to establish a new connection|Temporary failure in name resolution|Network is unreachable" "$tmp/pip.log"; then
    echo "SKIPPED: pip could not fetch the build requirements (no PyPI?)"
    exit 77
  fi
  exit 1
fi
# What -v shows of the build: scikit-build-core's stages and ninja's steps.
grep -E '\*\*\* |\[[0-9]+/[0-9]+\] Linking' "$tmp/pip.log" || true
cd "$tmp"
"$tmp/venv/bin/python" - <<'PY'
import rckpt, torch
assert "site-packages" in rckpt.__file__, rckpt.__file__  # the installed package
state = {"model": {"w": torch.arange(6.0).reshape(2, 3)}, "controller": {"epoch": 2}}
rckpt.save("ck.rckpt", state, rng=rckpt.capture_rng(), codec="zstd")
ck = rckpt.load("ck.rckpt", model_device="auto")
assert torch.equal(ck["model"]["w"], state["model"]["w"]) and ck["controller"] == {"epoch": 2}
rckpt.restore_rng(ck.rng)
print("pip install . works:", rckpt.__file__, "torch", torch.__version__)
PY
installed_cli="$tmp/venv/bin/rckpt"
if [ ! -x "$installed_cli" ]; then
  echo "FAIL: pip install . put no rckpt CLI into the venv ($installed_cli missing)"; exit 1
fi
# On PATH as an activated venv puts it, the installed tool answers as the built one.
PATH="$tmp/venv/bin:$PATH" rckpt --help >help.txt
grep -q "^  inspect " help.txt || { cat help.txt; echo "FAIL: rckpt --help lists no inspect"; exit 1; }
"$built_cli" --help | diff - help.txt
"$built_cli" --version | diff - <("$installed_cli" --version)
untimed() { sed -E 's/; [0-9.]+ s, [^)]*\)$/)/'; }  # verify ends with its time and speed
for command in "inspect ck.rckpt" "inspect ck.rckpt --json" "verify ck.rckpt"; do
  # shellcheck disable=SC2086  # the command's words
  if ! diff <("$built_cli" $command 2>&1 | untimed) <("$installed_cli" $command 2>&1 | untimed); then
    echo "FAIL: the installed rckpt $command differs from the built one (above)"; exit 1
  fi
done
echo "the installed rckpt CLI works: $installed_cli ($("$installed_cli" --version))"
if [ -n "$mpiexec" ]; then
  cat >"$tmp/dist.py" <<'PY'
from mpi4py import MPI
import torch
import rckpt.distributed as rd
assert "site-packages" in rd.__file__, rd.__file__
comm = MPI.COMM_WORLD
w = torch.arange(12.0).reshape(4, 3)
rd.save(comm, "dist.rckpt", {"model": {"w": rd.Shard.split(w, comm.rank, comm.size)}})
back = rd.load(comm, "dist.rckpt", {"model.w": None})
assert torch.equal(back.blocks["model.w"], w) and back.saved_world_size == comm.size
if comm.rank == 0:
    print("rckpt.distributed works on", comm.size, "ranks:", rd.__file__)
PY
  flags=(--oversubscribe -np 2 --mca btl self,vader)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
  "$mpiexec" "${flags[@]}" "$tmp/venv/bin/python" "$tmp/dist.py"
fi
