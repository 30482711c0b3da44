#!/usr/bin/env bash
# The GPU proof: rckpt's device path on a real GPU, in one command, on the GPU
# test machine as it is (docs/PERFORMANCE.md "GPU" says how to run it and what
# it records).
#
#   bash tests/gpu/proof.sh [--dry-run] [--out DIR] [--budget S] [--mib N]
#                           [--state-gib G] [--saves N] [--libtorch]
#                           [--scratch DIR] [--keep-scratch]
#
# Needs gpu-carry/ from scripts/gpu-prepare.sh (run where the dependencies
# are) beside the work tree. Steps, each a row of DIR/results.md written as it
# finishes, each under its own timeout, all of them under one budget (--budget,
# default 240 s: the device machine's calls are short):
#   1. environment: the carried files, the machine's Python, torch, nvidia-smi;
#   2. smoke, fail-fast: `rckpt doctor` and a CLI load onto cuda:0; then
#      whether Python.h exists (sysconfig), said either way;
#   3. the C++ GPU suites with --require-gpu (a skip is a failure), before
#      the extension's build, so a machine without Python.h still runs them;
#   4. the Python extension built for this machine's Python and torch from
#      the carried headers and libraries alone (its build time is printed);
#   5. `python -m rckpt doctor`, fail-fast;
#   6. the device path against torch's streams and allocator
#      (tests/gpu/proof_checks.py: a load and a save beside a busy stream,
#      the device pool constant over N calls, no spinning while a load waits,
#      a side-stream tensor freed right after save_async);
#   7. the Python CUDA suite (tests/python/test_gpu.py, RCKPT_REQUIRE_GPU=1);
#   8. hippynn trained on cuda:0, resumed on cuda:0 and on the CPU;
#   9. load throughput against pinned cudaMemcpyAsync, torch.load and
#      safetensors (bench/gpu_bench.py load, --mib, default 256);
#  10. the save_async stall against DCP async_save (bench/gpu_bench.py stall,
#      --state-gib, default 0.25, --saves, default 3; one checkpoint per method);
#  11. with --libtorch only (it builds against libtorch's headers, minutes more
#      than the budget): rckpt::torch's CUDA half (tests/gpu/libtorch/run.sh),
#      under its own 300 s, added to the budget.
# DIR (default $OUT, the device tool's output folder, else build-gpu-proof/)
# receives only what comes back from the device machine: results.md (the
# steps and every measurement's rows), proof.log (every step's output, each
# capped at 1 MiB) and the measurements' JSON (checks.json, load.json,
# stall.json). The build, hippynn's site-packages, TMPDIR and every checkpoint
# live in a scratch folder (a new one under /tmp, or --scratch DIR, emptied
# first; named in proof.log), each step's scratch deleted when its row is
# written and the folder at exit (kept with --keep-scratch).
# tests/gpu/check-out.sh checks DIR against the device tool's rules.
# --dry-run (CI, where there is no GPU) runs everything up to "no GPU here":
# the carried files, the doctor (which must say why there is no GPU), the
# Python.h check, the C++ GPU suites (which skip), the extension's configure
# plus the objects that use each carried dependency, and the checks script's
# rows as "not run"; then exit 0. PYTHON names the interpreter (default
# python3). Exit 1 when a step fails, times out or is not reached in the budget.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dry=0
out="${OUT:-$root/build-gpu-proof}"
budget=240
mib=256
state_gib=0.25
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
  # A fixed path (CI's dry run: the extension's objects then hit ccache).
  rm -rf "$scratch"
  mkdir -p "$scratch"
  scratch="$(cd "$scratch" && pwd)"
else
  scratch="$(mktemp -d /tmp/rckpt-gpu-proof.XXXXXX)"
fi
cleanup() { [ "$keep" = 1 ] || rm -rf "$scratch"; }
trap cleanup EXIT
trap 'exit 143' TERM INT
mkdir -p "$out" "$scratch/logs" "$scratch/sections" "$scratch/tmp"
results="$out/results.md"
log="$out/proof.log"
rm -f "$results" "$log" "$out/checks.json" "$out/load.json" "$out/stall.json"
failed=0
py="${PYTHON:-python3}"  # the machine's Python with torch and nanobind
pybuild="$scratch/build-python"
export root carry py pybuild dry scratch
export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RCKPT_CLI_BINARY="$carry/bin/rckpt" RCKPT_DEMO_BINARY="$carry/bin/rckpt-train-demo"

# say LINE: to the terminal and to the combined log.
say() { echo "$*"; echo "$*" >> "$log"; }
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

# What DIR holds, against what comes back from the device machine (the
# scratch folder still exists: it goes at exit), said in the log and the
# terminal; a broken rule fails the proof.
check_out() {
  if ! bash "$root/tests/gpu/check-out.sh" "$out" --scratch-may-stay 2>&1 | tee -a "$log"; then
    failed=1
  fi
}

# results.md, rebuilt after every row: the steps' table, then the
# measurements' tables in the order their steps ran.
publish() {
  cat "$scratch/head.md" "$scratch/steps.md" "$scratch"/sections/*.md > "$results" 2>/dev/null
}

# row NAME RESULT SECONDS NOTE
row() {
  echo "| $1 | $2 | $3 | $(printf '%s' "$4" | tr '|\n' '/ ' | cut -c1-200) |" >> "$scratch/steps.md"
  publish
  say "== $1: $2 ($3 s) $4"
}

# The step's output into the combined log, at most 1 MiB of it (its first
# 256 KiB and its last 768 KiB).
append_log() {
  local f="$1" size
  size=$(stat -c %s "$f")
  if [ "$size" -le $(( 1 << 20 )) ]; then
    cat "$f" >> "$log"
  else
    head -c $(( 256 << 10 )) "$f" >> "$log"
    echo "... [$(( size - (1 << 20) )) bytes of this step's output left out] ..." >> "$log"
    tail -c $(( 768 << 10 )) "$f" >> "$log"
  fi
}

# step NAME BUDGET_S FAIL_FAST COMMAND...: runs it (a command or an exported
# function) under min(BUDGET_S, what is left of the proof's budget), with its
# own TMPDIR in the scratch folder, deleted with what it holds once the row is
# written. Returns 0 when it passed, 1 when it failed, 2 when the budget left
# no time to run it.
step() {
  local name="$1" step_budget="$2" fail_fast="$3"
  shift 3
  local slug left limit t0 rc secs slog note
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
  echo >> "$log"
  say "===== $name (timeout ${limit} s of its ${step_budget} s)"
  TMPDIR="$scratch/tmp/$slug" timeout -k 10 "$limit" bash -c '"$@"' step "$@" >"$slog" 2>&1
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  append_log "$slog"
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
           bin/rckpt_gpu_throughput deps/include/zstd.h deps/include/xxhash.h deps/bin/flatc; do
    [ -e "$carry/$f" ] || { echo "missing gpu-carry/$f: run scripts/gpu-prepare.sh where the dependencies are"; return 1; }
  done
  ls "$carry"/wheels/hippynn-*.whl >/dev/null || { echo "missing hippynn's wheel"; return 1; }
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader || echo "nvidia-smi: not found"
  echo "cores $(nproc), /tmp free $(df -Pk /tmp | awk 'NR == 2 {print int($4 / 1048576)}') GiB"
  "$py" -c "import sys, torch, numpy, nanobind, pytest; print('python', sys.version.split()[0], \
'torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
}
export -f check_carry
step environment 30 1 check_carry

# 2. Smoke: the doctor and one load onto the GPU, before anything long.
doctor_log="$scratch/logs/doctor.log"
timeout -k 5 60 "$carry/bin/rckpt" doctor >"$doctor_log" 2>&1
doctor_rc=$?
append_log "$doctor_log"
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
  step smoke 60 1 "$carry/bin/rckpt" load --model-device cuda:0 \
    "$root/tests/data/golden/v1.0-training-state.rckpt"
fi
# The extension needs this Python's headers (the machine's Python may lack
# them): said here, before anything waits on them.
python_headers() {
  "$py" -c 'import os, sys, sysconfig
inc = sysconfig.get_paths()["include"]
h = os.path.join(inc, "Python.h")
if os.path.isfile(h):
    print("Python.h found:", h)
else:
    print("Python.h MISSING: no", h, "(the extension cannot be built for this Python; the C++ suites still run)")
    sys.exit(1)'
}
export -f python_headers
step "smoke: Python.h" 15 0 python_headers
headers_rc=$?

# 3. The C++ GPU suites, before the extension's build: a skip is a failure
# (in the dry run they skip, which shows the carried binaries start here).
require=(--require-gpu)
[ "$no_gpu" = 1 ] && require=()
step "C++ gpu tests" 90 0 "$carry/bin/gpu_tests" "${require[@]}"
step "C++ restart on the GPU" 60 0 "$carry/bin/restart_gpu_tests" "${require[@]}"

# 4. The Python extension for this machine's Python and torch.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export launcher_args="${launcher[*]}"
# Every header of zstd, xxHash and FlatBuffers an object used came from
# gpu-carry/ (the machine has none of them; a build here must not find the
# system's).
deps_from_carry() {
  local carry_deps headers outside
  carry_deps="$(realpath "$carry/deps")"
  # ninja's paths are relative to the build folder when it lies inside the
  # work tree (CI's --scratch): made absolute before comparing.
  headers="$(ninja -C "$pybuild" -t deps | sed 's/^ *//' |
             grep -E '(^|/)(zstd|xxhash|flatbuffers/[a-z_]+)\.h$' | sort -u |
             (cd "$pybuild" && xargs -r realpath -m) | sort -u)"
  outside="$(echo "$headers" | grep -v "^$carry_deps/" | grep .)"
  if [ -n "$outside" ]; then
    echo "headers from outside gpu-carry/:"
    echo "$outside" | head
    return 1
  fi
  if [ -z "$headers" ]; then
    echo "ninja's dependency log names no zstd, xxHash or FlatBuffers header: nothing checked"
    return 1
  fi
  echo "$(echo "$headers" | grep -c .) zstd, xxHash and FlatBuffers headers, all from gpu-carry/"
}
build_extension() {
  local t0 t1 t2 what
  t0=$(date +%s)
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$pybuild" -G Ninja -DCMAKE_BUILD_TYPE=Release $launcher_args \
    -DCMAKE_PREFIX_PATH="$carry/deps" -DRCKPT_PYTHON="$(command -v "$py")" -DRCKPT_BUILD_PYTHON=ON \
    -DRCKPT_BUILD_TESTS=OFF -DRCKPT_BUILD_EXAMPLES=OFF -DRCKPT_BUILD_BENCH=OFF \
    -DRCKPT_ENABLE_MPI=OFF || return 1
  t1=$(date +%s)
  if [ "$dry" = 1 ]; then
    # The objects that use each carried dependency (flatc generates the
    # schema header), not the whole library: CI's time is short.
    ninja -C "$pybuild" src/CMakeFiles/rckpt.dir/codec/codec.cc.o \
      src/CMakeFiles/rckpt.dir/format/manifest.cc.o src/CMakeFiles/rckpt.dir/format/file_reader.cc.o || return 1
    what="configured + the objects that use the carried dependencies (dry run)"
  else
    cmake --build "$pybuild" -j "$(nproc)" --target rckpt_python_package rckpt_cli || return 1
    what="built"
  fi
  t2=$(date +%s)
  deps_from_carry || return 1
  echo "extension $what in $(( t2 - t0 )) s (configure $(( t1 - t0 )) s, build $(( t2 - t1 )) s, $(nproc) cores)"
}
export -f deps_from_carry build_extension
if [ "$headers_rc" = 1 ]; then
  failed=1
  row extension "not run" 0 "this Python has no Python.h (see smoke: Python.h)"
else
  step extension 180 1 build_extension
fi
export PYTHONPATH="$pybuild/python${PYTHONPATH:+:$PYTHONPATH}"

if [ "$no_gpu" = 1 ]; then
  step "device path checks" 30 0 "$py" "$root/tests/gpu/proof_checks.py" --dry-run \
    --table "$scratch/sections/06-checks.md" --json "$out/checks.json" --dir "$scratch/files"
  row "device steps" "not run" 0 "no GPU here: the proof stops before the steps that need one"
  check_out
  say "proof: dry run $( [ "$failed" = 0 ] && echo complete || echo FAILED ), no GPU here ($(( $(date +%s) - start )) s); the table is $results"
  [ "$failed" = 0 ] || exit 1
  exit 0
fi
if [ "$headers_rc" = 1 ]; then
  say "proof: FAILED: without Python.h nothing past the C++ suites can run"
  exit 1
fi

step "python doctor" 30 1 "$py" -m rckpt doctor

# 6. The device path against torch's streams and allocator.
step "device path checks" 90 0 "$py" "$root/tests/gpu/proof_checks.py" \
  --table "$scratch/sections/06-checks.md" --json "$out/checks.json" --dir "$scratch/files"

# 7. The Python CUDA suite against this machine's torch.
step "python CUDA suite" 120 0 env RCKPT_REQUIRE_GPU=1 RCKPT_CLI="$carry/bin/rckpt" \
  RCKPT_TEST_DATA_DIR="$root/tests/data" RCKPT_SOURCE_DIR="$root" \
  "$py" -m pytest -q -ra -p no:cacheprovider -m gpu "$root/tests/python/test_gpu.py"

# 8. hippynn trained on cuda:0, resumed on cuda:0 and on the CPU; its
# site-packages in the scratch folder, its run folders in the step's TMPDIR.
site="$scratch/site"
if step "hippynn install" 30 0 "$py" -m pip install -q --no-deps --no-index --target "$site" \
     "$carry"/wheels/hippynn-*.whl; then
  for resume in cuda:0 cpu; do
    step "hippynn cuda:0 -> $resume" 60 0 env PYTHONPATH="$PYTHONPATH:$site" \
      "$py" "$root/tests/hippynn/restart_scenario.py" --device cuda:0 --resume-on "$resume"
  done
fi

# 9-10. Throughput and stall rows; each checkpoint deleted once its row is written.
step "load throughput" 60 0 "$py" "$root/bench/gpu_bench.py" load --mib "$mib" --reps 3 \
  --table "$scratch/sections/09-load.md" --json "$out/load.json" --dir "$scratch/files"
step "save_async stall" 90 0 "$py" "$root/bench/gpu_bench.py" stall --gib "$state_gib" \
  --saves "$saves" --table "$scratch/sections/10-stall.md" --json "$out/stall.json" \
  --dir "$scratch/files"
rm -rf "$scratch/files"

# 11. rckpt::torch's CUDA half, opt-in.
if [ "$libtorch" = 1 ]; then
  step "libtorch GPU half" "$libtorch_budget" 0 bash "$root/tests/gpu/libtorch/run.sh" \
    --require-gpu --rckpt-build "$pybuild" --out "$scratch/libtorch"
else
  row "libtorch GPU half" "not run" 0 "opt-in (--libtorch): its build against libtorch's headers does not fit the ${budget} s budget"
fi

check_out
say "proof: $( [ "$failed" = 0 ] && echo passed || echo FAILED ) in $(( $(date +%s) - start )) s;" \
    "the table is $results"
exit "$failed"
