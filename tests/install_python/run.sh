#!/usr/bin/env bash
# `pip install .` from the repository root into a fresh venv (it sees the
# system's torch, numpy and mpi4py), then `import rckpt` and a small
# save/load from outside the source tree. Arguments: the source dir, the
# interpreter to make the venv from, and where the build found MPI, mpiexec:
# then the installed rckpt.distributed saves and loads on 2 ranks. The build
# requirements (scikit-build-core, nanobind) come from PyPI or pip's cache.
set -euo pipefail
src="$1"; python="$2"; mpiexec="${3:-}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$python" -m venv --system-site-packages "$tmp/venv"
if ! "$tmp/venv/bin/pip" install -q --disable-pip-version-check "$src" >"$tmp/pip.log" 2>&1; then
  cat "$tmp/pip.log"
  if grep -qiE "could not find a version|connection|network|resolve" "$tmp/pip.log"; then
    echo "SKIPPED: pip could not fetch the build requirements (no PyPI?)"
    exit 77
  fi
  exit 1
fi
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
