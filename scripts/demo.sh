#!/usr/bin/env bash
# The restart demo (README: `bash scripts/demo.sh`): installs what is
# missing, builds rckpt, then a training run on "GPU 1" checkpoints with
# rckpt and crashes; it is resumed on this machine's devices
# (--model-device auto) and `rckpt diff` proves that the continuation is
# bit-identical to a run that never stopped.
#
#   bash scripts/demo.sh [BUILD_DIR]        (default: build/ in the repository)
#
# The first run lives on emulated cuda:1 (--emulate-devices 2 --device cuda:1),
# so the scenario is the same on a laptop and on a GPU server: on a machine
# with a GPU, auto resumes on the real cuda:0, otherwise on the CPU.
#
# Last, the Python package is installed as README says (a venv over
# Debian's torch in .venv, `pip install .`, which also installs the rckpt
# CLI there) and reads the resumed run's checkpoint. PYTHON=... names another
# interpreter with torch to make the venv from.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
STEPS=300 EVERY=50 STOP=175 HIDDEN=256

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Installing what is missing, building rckpt in $BUILD"
# python3-torch, python3-venv, python3-pip: the Python package of step 9.
bash "$ROOT/scripts/install-deps.sh" python3-torch python3-venv python3-pip
build_log=$(mktemp)
if ! BUILD_DIR="$BUILD" bash "$ROOT/scripts/build.sh" >"$build_log" 2>&1; then
  tail -40 "$build_log"; echo "build failed (full log: $build_log)"; exit 1
fi
tail -1 "$build_log"; rm -f "$build_log"

DEMO=$BUILD/examples/rckpt-train-demo
RCKPT=$BUILD/tools/rckpt
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rckpt-demo.XXXXXX")
cd "$WORK"
ulimit -c 0  # the crash below is on purpose: no core file
ON_GPU1=(--emulate-devices 2 --device cuda:1)
COMMON=(--steps "$STEPS" --hidden "$HIDDEN")
echo "working in $WORK"

step "1. Reference: $STEPS steps without interruption, on (emulated) cuda:1"
"$DEMO" "${COMMON[@]}" "${ON_GPU1[@]}" --final reference.rckpt | grep -v '^epoch'

step "2. The same run, checkpointing every $EVERY steps, crashes after step $STOP"
set +e
# (stderr of the group is quiet, so bash's own "Aborted" notice stays out.)
{ "$DEMO" "${COMMON[@]}" "${ON_GPU1[@]}" --checkpoint last.rckpt \
          --checkpoint-every "$EVERY" --stop-after "$STOP" >crash.log 2>crash.err; } 2>/dev/null
code=$?
set -e
grep -v '^epoch' crash.log; cat crash.err
echo "(exit code $code: the process died without cleanup)"

step "3. What the checkpoint holds: rckpt inspect last.rckpt"
if [ -x "$RCKPT" ]; then
  "$RCKPT" inspect last.rckpt | awk '/^tree/{skip = 1} !skip'
  "$RCKPT" verify last.rckpt
else
  echo "(rckpt CLI not built: skipped)"
fi

step "4. Resuming with no placement options on this machine (no cuda:1 here)"
set +e
"$DEMO" --resume last.rckpt --steps "$STEPS" --final never.rckpt
echo "(exit code $?)"
set -e

step "5. Where --model-device auto would put things: rckpt plan (a few rows), rckpt load"
if [ -x "$RCKPT" ] && "$RCKPT" plan --help >/dev/null 2>&1; then
  "$RCKPT" plan last.rckpt --model-device auto |
    grep -E '^KIND|^tensor (model\.fc1\.weight|optimizer\.state\.0\.(exp_avg|step)|metrics\.best_model\.fc1\.weight|database\.x) |^rng +rng\.dropout|tensors:'
  echo
  echo "rckpt load on 2 emulated GPUs, as stored (the engine's restore, timed):"
  "$RCKPT" load last.rckpt --emulate-devices 2 | sed -n '1,4p'
else
  echo "(rckpt plan not available in this build: skipped)"
fi

step "6. Resuming with --model-device auto"
"$DEMO" --resume last.rckpt --model-device auto --steps "$STEPS" \
        --checkpoint last.rckpt --checkpoint-every "$EVERY" --final resumed.rckpt \
        | tee resume.log | grep -v '^epoch'

step "7. rckpt diff --ignore-devices reference.rckpt resumed.rckpt"
if [ -x "$RCKPT" ] && "$RCKPT" diff --help >/dev/null 2>&1; then
  set +e
  "$RCKPT" diff --ignore-devices reference.rckpt resumed.rckpt
  code=$?
  set -e
  if [ "$code" -eq 0 ]; then
    echo "identical: the resumed run continued exactly as if it had never stopped"
  else
    echo "DIFFERENT (exit $code)"; exit 1
  fi
else
  echo "(rckpt diff not available in this build: skipped; tests/restart compares"
  echo " the same files through the library)"
fi

step "8. Timings"
awk '/ saved in /{n++; s+=$(NF-1)} END{if(n) printf "checkpoint saves: %d, mean %.1f ms\n", n, s/n}' crash.log
grep -h 'restored in' resume.log | sed 's/^/restore: /'
grep -h '^final' resume.log | sed 's/^/final save: /'
echo
echo "files kept in $WORK"

step "9. From Python: a venv over this machine's torch, pip install . (README, \"Use it from Python\")"
PYTHON=${PYTHON:-/usr/bin/python3}
pip_failed() {
  tail -30 "$1"
  if grep -qE "Could not find a version that satisfies|Failed to establish a new connection|Temporary failure in name resolution|Network is unreachable" "$1"; then
    echo "pip could not fetch the build requirements (scikit-build-core, nanobind) from PyPI"
  fi
  echo "pip install failed (full log: $1)"
  exit 1
}
VENV=$ROOT/.venv
# The sources the package is built from, as they are now (committed or not):
# an install from the same sources is not rebuilt.
sources=(CMakeLists.txt pyproject.toml cmake cuda include python schema src tools)
stamp=$(cd "$ROOT" && { git ls-files -s -- "${sources[@]}"; git diff -- "${sources[@]}"
                        git ls-files -o --exclude-standard -- "${sources[@]}"; } 2>/dev/null |
        sha256sum | cut -c1-16)
git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 || stamp="unknown-$$"  # not a checkout: rebuild
if [ -x "$VENV/bin/rckpt" ] && [ "$(cat "$VENV/.rckpt-source" 2>/dev/null)" = "$stamp" ]; then
  echo "$VENV has rckpt from this source already (rm -rf $VENV to rebuild it)"
else
  if ! "$PYTHON" -c "import torch" 2>/dev/null; then
    echo "$PYTHON has no torch: rckpt imports the torch of the Python it is installed for;"
    echo "run with PYTHON=/path/to/a/python/with/torch"
    exit 1
  fi
  echo "\$ $PYTHON -m venv --system-site-packages .venv   # sees the system's torch and numpy"
  "$PYTHON" -m venv --system-site-packages "$VENV"
  echo "\$ .venv/bin/pip install -v .   # builds the library, the extension and the CLI (minutes)"
  pip_log=$WORK/pip-install.log
  launcher=()
  if command -v ccache >/dev/null; then
    # Reinstalls after a change recompile only what changed: CMake takes the
    # launcher from the environment, and CCACHE_BASEDIR=/ lets ccache match
    # the temporary build directory pip uses each time.
    launcher=(env CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR=/)
  fi
  # pip -v shows the build's own output; of it, scikit-build-core's *** stages and
  # ninja's [done/total] steps, every 10 %.
  if ! "${launcher[@]}" "$VENV/bin/pip" install -v --disable-pip-version-check "$ROOT" 2>&1 | tee "$pip_log" |
       awk 'match($0, /\[[0-9]+\/[0-9]+\]/) {
              split(substr($0, RSTART + 1, RLENGTH - 2), n, "/"); p = int(10 * n[1] / n[2]) * 10
              if (p > shown) { shown = p; printf "  building: %3d%% (%s/%s steps)\n", p, n[1], n[2]; fflush() }
            }
            /\*\*\* / || /^Successfully installed/ { sub(/^ +/, ""); print "  " $0; fflush() }'; then
    pip_failed "$pip_log"
  fi
  grep -q '^Successfully installed' "$pip_log" || pip_failed "$pip_log"
  echo "$stamp" >"$VENV/.rckpt-source"
fi
"$VENV/bin/python" - resumed.rckpt <<'PY'
import sys, rckpt, torch
ck = rckpt.load(sys.argv[1], model_device="auto")
print(f"import rckpt: rckpt {rckpt.__version__} over torch {torch.__version__} ({rckpt.__file__})")
print(f"rckpt.load({sys.argv[1]!r}, model_device='auto'): sections {', '.join(ck.sections)}; "
      f"{len(ck.tensors)} tensors, model.fc1.weight on {ck.placement['model.fc1.weight']}; "
      f"RNG records {', '.join(ck.rng)}")
PY
echo "\$ .venv/bin/rckpt verify resumed.rckpt"
"$VENV/bin/rckpt" verify resumed.rckpt
