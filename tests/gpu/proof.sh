#!/usr/bin/env bash
# The GPU proof: rckpt's device path on a real GPU, in one command, on the GPU
# test machine as it is (tests/gpu/README.md says how to run it; docs/
# PERFORMANCE.md "GPU" what it records).
#
#   bash tests/gpu/proof.sh [--dry-run] [--out DIR] [--budget S] [--mib N]
#                           [--state-gib G] [--saves N] [--libtorch]
#                           [--scratch DIR] [--keep-scratch]
#
# Needs gpu-carry/ from scripts/gpu-prepare.sh (run where the dependencies
# are) beside the work tree: the binaries, and the Python package with its
# extension already built for CPython 3.12, so no device time goes to
# compiling. The measurements come first, then the checks, then what only
# confirms (hippynn, the Python suite): a run cut short keeps its numbers.
# Steps, each a row of DIR/results.md written as it finishes, each under its
# own timeout, all of them under one budget (--budget, default 240 s):
#   1. environment: the carried files, the machine's Python, torch, nvidia-smi;
#   2. smoke, fail-fast: `rckpt doctor` and a CLI load onto cuda:0;
#   3. the carried extension imported by this machine's Python, fail-fast,
#      and `python -m rckpt doctor`;
#   4. load throughput: --mib (default 2048) MiB against pinned
#      cudaMemcpyAsync, torch.load and safetensors (bench/gpu_bench.py load);
#   5. a sharded file's restore (format 1.1) beside a plain file's
#      (bench/gpu_bench.py sharded, --mib);
#   6. the save_async stall of a --state-gib (default 4) GiB training state,
#      first save and later saves apart, against a device-to-host copy and
#      DCP async_save (bench/gpu_bench.py stall, --saves, default 3);
#      every row of 4-6 says the unpinned staging leases and the bytes the
#      device un-shuffled;
#   7. the device path against torch's streams and allocator
#      (tests/gpu/proof_checks.py);
#   8. the C++ GPU suites with --require-gpu (a skip is a failure);
#   9. hippynn trained on cuda:0, resumed on cuda:0 and on the CPU;
#  10. the Python CUDA suite (tests/python/test_gpu.py, RCKPT_REQUIRE_GPU=1);
#  11. with --libtorch only (it builds against libtorch's headers, minutes more
#      than the budget): rckpt::torch's CUDA half (tests/gpu/libtorch/run.sh),
#      under its own 300 s, added to the budget.
# DIR (default $OUT, the device tool's output folder, else build-gpu-proof/)
# receives only what comes back from the device machine: results.md (the
# steps and every measurement's rows, rebuilt at each row and when the proof
# is stopped), proof.log (every step's output streamed as it runs: the first
# 768 KiB of a step and its last 128 KiB, 8 MiB in all at most) and the
# measurements' JSON (load.json, sharded.json, stall.json, checks.json,
# rewritten at each row). The checkpoints, hippynn's site-packages and
# TMPDIR live in a scratch folder (a new one under /tmp, or --scratch DIR,
# emptied first; named in proof.log), each step's scratch deleted when its
# row is written and the folder at exit (kept with --keep-scratch).
# tests/gpu/check-out.sh checks DIR against the device tool's rules.
# --dry-run (CI, where there is no GPU) runs everything a machine without one
# can: the carried files, the doctor (which must say why there is no GPU),
# the carried extension loaded by the interpreter it was built for, the
# measurements on the CPU with a few MiB (--smoke: the scripts and their rows,
# through PYTHON and the package at PYTHONPATH), the checks' rows as "not
# run", the C++ GPU suites (which skip); then exit 0. PYTHON names the
# interpreter (default python3). Exit 1 when a step fails, times out or is
# not reached in the budget.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dry=0
out="${OUT:-$root/build-gpu-proof}"
budget=240
mib=2048
state_gib=4
saves=3
libtorch=0
keep=0
scratch=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --out) out="$2"; shift ;;
    --budget) budget="$2"; shift ;;
    --mib) mib="$2"; shift ;;
    --state-gib) state_gib="$2"; shift ;;
    --saves) saves="$2"; shift ;;
    --libtorch) libtorch=1 ;;
    --scratch) scratch="$2"; shift ;;
    --keep-scratch) keep=1 ;;
    *) echo "usage: $0 [--dry-run] [--out DIR] [--budget S] [--mib N] [--state-gib G]" \
            "[--saves N] [--libtorch] [--scratch DIR] [--keep-scratch]" >&2; exit 2 ;;
  esac
  shift
done
libtorch_budget=300
[ "$libtorch" = 1 ] && budget=$(( budget + libtorch_budget ))
start=$(date +%s)
deadline=$(( start + budget ))
carry="$root/gpu-carry"
if [ -n "$scratch" ]; then
  rm -rf "$scratch"
  mkdir -p "$scratch"
  scratch="$(cd "$scratch" && pwd)"
else
  scratch="$(mktemp -d /tmp/rckpt-gpu-proof.XXXXXX)"
fi
mkdir -p "$out" "$scratch/logs" "$scratch/sections" "$scratch/tmp"
results="$out/results.md"
log="$out/proof.log"
rm -f "$results" "$log" "$out"/*.json
: > "$log"
failed=0
py="${PYTHON:-python3}"  # the machine's Python with torch
# proof.log's bounds: each step streams its first step_head bytes as they come
# and, when it said more, its last step_tail bytes at its end; nothing is
# streamed past log_cap (the rows' lines still are, within log_room).
step_head=$(( 768 << 10 ))
step_tail=$(( 128 << 10 ))
log_room=$(( 256 << 10 ))
log_cap=$(( (8 << 20) - log_room ))
export root carry py dry scratch
export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RCKPT_CLI_BINARY="$carry/bin/rckpt" RCKPT_DEMO_BINARY="$carry/bin/rckpt-train-demo"
if [ "$dry" = 1 ]; then
  # The machine has no GPU and no CPython 3.12 with torch: the measurements'
  # scripts run on the CPU through PYTHON and the package it imports.
  pypath="${PYTHONPATH:-$root/build/python}"
else
  pypath="$carry/python${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$pypath"

log_size() { stat -c %s "$log"; }
# say LINE: to the terminal and to the combined log (within its bound).
say() {
  echo "$*"
  [ "$(log_size)" -lt $(( log_cap + log_room - 4096 )) ] && echo "$*" >> "$log"
}
say "rckpt GPU proof: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); budget ${budget} s; scratch: $scratch"
say "out: $out (results.md, proof.log and the measurements' JSON only)"

{
  echo "# rckpt GPU proof, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "Budget ${budget} s. Each step ran under its own timeout; its output is in proof.log."
  echo
  echo "| step | result | seconds | note |"
  echo "|---|---|---|---|"
} > "$scratch/head.md"
: > "$scratch/steps.md"

# results.md, rebuilt after every row and when the proof is stopped: the
# steps' table, then the measurements' tables in the order their steps ran
# (each written row by row as the step runs).
publish() {
  cat "$scratch/head.md" "$scratch/steps.md" "$scratch"/sections/*.md > "$results" 2>/dev/null
}
cleanup() { [ "$keep" = 1 ] || rm -rf "$scratch"; }
stopped() {
  echo "| (stopped) | FAIL | $(( $(date +%s) - start )) | the proof was stopped here |" >> "$scratch/steps.md"
  publish
  cleanup
  exit 143
}
trap cleanup EXIT
trap stopped TERM INT

# What DIR holds, against what comes back from the device machine (the
# scratch folder still exists: it goes at exit); a broken rule fails the proof.
check_out() {
  if ! bash "$root/tests/gpu/check-out.sh" "$out" --scratch-may-stay 2>&1 | tee -a "$log"; then
    failed=1
  fi
}

# row NAME RESULT SECONDS NOTE
row() {
  echo "| $1 | $2 | $3 | $(printf '%s' "$4" | tr '|\n' '/ ' | cut -c1-200) |" >> "$scratch/steps.md"
  publish
  say "== $1: $2 ($3 s) $4"
}

# step NAME BUDGET_S FAIL_FAST COMMAND...: runs it (a command or an exported
# function) under min(BUDGET_S, what is left of the proof's budget), with its
# own TMPDIR in the scratch folder, deleted with what it holds once the row is
# written. Its output streams into proof.log as it comes (its head; its tail
# at its end, when it said more). Returns 0 when it passed, 1 when it failed,
# 2 when the budget left no time to run it.
step() {
  local name="$1" step_budget="$2" fail_fast="$3"
  shift 3
  local slug left limit t0 rc secs slog note head_bytes size
  slug="$(echo "$name" | tr -c 'A-Za-z0-9\n' '-')"
  left=$(( deadline - $(date +%s) ))
  if [ "$left" -lt 10 ]; then
    failed=1
    row "$name" "not run" 0 "the proof's ${budget} s budget is spent"
    return 2
  fi
  limit=$(( step_budget < left ? step_budget : left ))
  slog="$scratch/logs/$slug.log"
  mkdir -p "$scratch/tmp/$slug"
  t0=$(date +%s)
  say ""
  say "===== $name (timeout ${limit} s of its ${step_budget} s)"
  head_bytes=$(( log_cap - $(log_size) ))
  [ "$head_bytes" -gt "$step_head" ] && head_bytes=$step_head
  [ "$head_bytes" -lt 0 ] && head_bytes=0
  # In the background, waited for: a TERM (the device tool's limit) runs the
  # trap at once, which writes results.md before the proof goes.
  { TMPDIR="$scratch/tmp/$slug" timeout -k 10 "$limit" bash -c '"$@"' step "$@" 2>&1
    echo "$?" > "$scratch/rc"; } | tee -p "$slog" | head -c "$head_bytes" >> "$log" &
  wait
  rc="$(cat "$scratch/rc" 2>/dev/null || echo 1)"
  rm -f "$scratch/rc"
  secs=$(( $(date +%s) - t0 ))
  size=$(stat -c %s "$slog")
  if [ "$size" -gt "$head_bytes" ]; then
    local tail_bytes=$(( log_cap - $(log_size) ))
    [ "$tail_bytes" -gt "$step_tail" ] && tail_bytes=$step_tail
    [ "$tail_bytes" -lt 0 ] && tail_bytes=0
    say "... [$(( size - head_bytes - tail_bytes < 0 ? 0 : size - head_bytes - tail_bytes )) bytes of this step's output left out] ..."
    if [ "$tail_bytes" -gt 0 ]; then
      tail -c "$(( tail_bytes < size - head_bytes ? tail_bytes : size - head_bytes ))" "$slog" >> "$log"
    fi
  fi
  rm -rf "$scratch/tmp/$slug"
  note="$(tail -1 "$slog")"
  if [ "$rc" = 0 ]; then
    row "$name" PASS "$secs" "$note"
    return 0
  fi
  failed=1
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    row "$name" FAIL "$secs" "timed out after ${limit} s: $note"
  else
    row "$name" FAIL "$secs" "exit $rc: $note"
  fi
  tail -30 "$slog"
  if [ "$fail_fast" = 1 ]; then
    say "proof: stopped at $name ($(( $(date +%s) - start )) s)"
    exit 1
  fi
  return 1
}

# 1. What the proof brings and what the machine has.
check_carry() {
  for f in bin/rckpt bin/gpu_tests bin/restart_gpu_tests bin/rckpt-train-demo bin/rckpt-bench \
           bin/rckpt_gpu_throughput python/rckpt/__init__.py python/BUILT_WITH \
           deps/include/zstd.h deps/include/xxhash.h deps/bin/flatc; do
    [ -e "$carry/$f" ] || { echo "missing gpu-carry/$f: run scripts/gpu-prepare.sh where the dependencies are"; return 1; }
  done
  ls "$carry"/python/rckpt/_core.cpython-312-*.so >/dev/null ||
    { echo "missing the extension for CPython 3.12 in gpu-carry/python/rckpt"; return 1; }
  ls "$carry"/wheels/hippynn-*.whl >/dev/null || { echo "missing hippynn's wheel"; return 1; }
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader || echo "nvidia-smi: not found"
  echo "cores $(nproc), /tmp free $(df -Pk /tmp | awk 'NR == 2 {print int($4 / 1048576)}') GiB"
  echo "extension built with CPython $(cat "$carry/python/BUILT_WITH")"
  "$py" -c "import sys, torch, numpy, pytest; print('python', sys.version.split()[0], \
'torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
}
export -f check_carry
step environment 15 1 check_carry

# 2. Smoke: the doctor and one load onto the GPU, before anything long.
doctor_log="$scratch/logs/doctor.log"
timeout -k 5 30 "$carry/bin/rckpt" doctor >"$doctor_log" 2>&1
doctor_rc=$?
head -c "$step_head" "$doctor_log" >> "$log"
if grep -q "^devices: none" "$doctor_log"; then
  if [ "$dry" = 1 ] && [ "$doctor_rc" = 0 ]; then
    row smoke "no GPU here" 0 "$(grep '^devices' "$doctor_log")"
    no_gpu=1
  else
    row smoke FAIL 0 "$(grep -E '^devices|PROBLEM' "$doctor_log" | tr '\n' ' ')"
    exit 1
  fi
else
  no_gpu=0
  if [ "$doctor_rc" != 0 ]; then
    row smoke FAIL 0 "rckpt doctor exit $doctor_rc: $(grep PROBLEM "$doctor_log")"
    exit 1
  fi
  step smoke 20 1 "$carry/bin/rckpt" load --model-device cuda:0 \
    "$root/tests/data/golden/v1.0-training-state.rckpt"
fi

# 3. The carried extension. On the GPU machine, its Python imports the
# package (which needs torch); here, the interpreter it was built for loads
# the extension module itself (it links no torch) and asks it for the doctor.
carried_extension() {
  local built_with
  built_with="$(cut -d' ' -f2 "$carry/python/BUILT_WITH")"
  if [ "$dry" = 1 ]; then
    "$built_with" -c 'import glob, importlib.machinery, importlib.util, sys
so = glob.glob(sys.argv[1] + "/rckpt/_core.cpython-312-*.so")[0]
spec = importlib.util.spec_from_file_location("rckpt._core", so,
    loader=importlib.machinery.ExtensionFileLoader("rckpt._core", so))
core = importlib.util.module_from_spec(spec)
spec.loader.exec_module(core)
r = core.doctor("/nonexistent/libcuda.so.1")
assert r["devices"] == [] and r["problem"] is None, r
print("the carried extension loads in CPython", sys.version.split()[0], "and runs:", so)' "$carry/python"
  else
    "$py" -c 'import sys, rckpt, rckpt._core as c
assert sys.version_info[:2] == (3, 12), sys.version
print("rckpt", rckpt.__version__ if hasattr(rckpt, "__version__") else "", "from", c.__file__)'
  fi
}
export -f carried_extension
step extension 15 1 carried_extension
[ "$no_gpu" = 0 ] && step "python doctor" 15 1 "$py" -m rckpt doctor

# 4-6. The measurements; each checkpoint deleted once its rows are written.
smoke=()
[ "$no_gpu" = 1 ] && smoke=(--smoke)
step "load throughput" 55 0 "$py" "$root/bench/gpu_bench.py" load --mib "$mib" --reps 3 \
  --table "$scratch/sections/04-load.md" --json "$out/load.json" --dir "$scratch/files" "${smoke[@]}"
step "sharded load" 25 0 "$py" "$root/bench/gpu_bench.py" sharded --mib "$mib" --reps 3 \
  --table "$scratch/sections/05-sharded.md" --json "$out/sharded.json" --dir "$scratch/files" \
  "${smoke[@]}"
step "save_async stall" 55 0 "$py" "$root/bench/gpu_bench.py" stall --state-gib "$state_gib" \
  --saves "$saves" --peers default --table "$scratch/sections/06-stall.md" \
  --json "$out/stall.json" --dir "$scratch/files" "${smoke[@]}"
rm -rf "$scratch/files"

# 7. The device path against torch's streams and allocator.
checks_dry=()
[ "$no_gpu" = 1 ] && checks_dry=(--dry-run)
step "device path checks" 40 0 "$py" "$root/tests/gpu/proof_checks.py" "${checks_dry[@]}" \
  --table "$scratch/sections/07-checks.md" --json "$out/checks.json" --dir "$scratch/files"

# 8. The C++ GPU suites: a skip is a failure (in the dry run they skip, which
# shows the carried binaries start here).
require=(--require-gpu)
[ "$no_gpu" = 1 ] && require=()
step "C++ gpu tests" 25 0 "$carry/bin/gpu_tests" "${require[@]}"
step "C++ restart on the GPU" 20 0 "$carry/bin/restart_gpu_tests" "${require[@]}"

if [ "$no_gpu" = 1 ]; then
  row "confirmations" "not run" 0 "no GPU here: hippynn and the Python CUDA suite need one"
  check_out
  say "proof: dry run $( [ "$failed" = 0 ] && echo complete || echo FAILED ), no GPU here ($(( $(date +%s) - start )) s); the table is $results"
  [ "$failed" = 0 ] || exit 1
  exit 0
fi

# 9. hippynn trained on cuda:0, resumed on cuda:0 and on the CPU; its
# site-packages in the scratch folder, its run folders in the step's TMPDIR.
site="$scratch/site"
if step "hippynn install" 15 0 "$py" -m pip install -q --no-deps --no-index --target "$site" \
     "$carry"/wheels/hippynn-*.whl; then
  for resume in cuda:0 cpu; do
    step "hippynn cuda:0 -> $resume" 45 0 env PYTHONPATH="$PYTHONPATH:$site" \
      "$py" "$root/tests/hippynn/restart_scenario.py" --device cuda:0 --resume-on "$resume"
  done
fi

# 10. The Python CUDA suite against this machine's torch.
step "python CUDA suite" 90 0 env RCKPT_REQUIRE_GPU=1 RCKPT_CLI="$carry/bin/rckpt" \
  RCKPT_TEST_DATA_DIR="$root/tests/data" RCKPT_SOURCE_DIR="$root" \
  "$py" -m pytest -q -ra -p no:cacheprovider -m gpu "$root/tests/python/test_gpu.py"

# 11. rckpt::torch's CUDA half, opt-in: it builds the library against
# libtorch's headers from the carried dependencies.
if [ "$libtorch" = 1 ]; then
  step "libtorch GPU half" "$libtorch_budget" 0 bash "$root/tests/gpu/libtorch/run.sh" \
    --require-gpu --deps "$carry/deps" --out "$scratch/libtorch"
else
  row "libtorch GPU half" "not run" 0 "opt-in (--libtorch): its build against libtorch's headers does not fit the ${budget} s budget"
fi

check_out
say "proof: $( [ "$failed" = 0 ] && echo passed || echo FAILED ) in $(( $(date +%s) - start )) s;" \
    "the table is $results"
exit "$failed"
