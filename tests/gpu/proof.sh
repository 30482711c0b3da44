#!/usr/bin/env bash
# The GPU proof: rckpt's device path on a real GPU, in one command, on the GPU
# test machine as it is (docs/PERFORMANCE.md "GPU" has what it measured).
#
#   bash tests/gpu/proof.sh [--dry-run] [--out DIR] [--mib N] [--state-gib G]
#
# Needs gpu-carry/ from scripts/gpu-prepare.sh (run where the dependencies
# are) beside the work tree. Steps, each a row of DIR/proof.md written as it
# finishes (logs in DIR/logs/):
#   1. carried files and the machine's Python, torch and nvidia-smi;
#   2. smoke, fail-fast: `rckpt doctor` and a CLI load onto cuda:0;
#   3. the Python extension built for this machine's Python and torch from
#      the carried headers and libraries (every dependency header must come
#      from gpu-carry/);
#   4. the C++ GPU suites with --require-gpu (a skip is a failure);
#   5. the Python CUDA suite (tests/python/test_gpu.py, RCKPT_REQUIRE_GPU=1);
#   6. a hippynn run trained on cuda:0 and resumed on cuda:0 and on the CPU;
#   7. load throughput against pinned cudaMemcpyAsync, torch.load and
#      safetensors (bench/gpu_bench.py load);
#   8. the save_async stall of a CUDA training state against DCP async_save
#      (bench/gpu_bench.py stall);
# the measurements' rows go to DIR/results.md as each finishes.
# PYTHON names the interpreter (default python3).
# --dry-run (CI, where there is no GPU) runs everything up to "no GPU here":
# the carried files, the doctor (which must say why there is no GPU), and the
# extension's configure plus the objects that use each carried dependency,
# then stops with exit 0. DIR defaults to $OUT (the device tool's output
# folder) or build-gpu-proof/. Exit 1 when a step fails.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dry=0
out="${OUT:-$root/build-gpu-proof}"
mib=1024
state_gib=1
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --out) out="$2"; shift ;;
    --mib) mib="$2"; shift ;;
    --state-gib) state_gib="$2"; shift ;;
    *) echo "usage: $0 [--dry-run] [--out DIR] [--mib N] [--state-gib G]" >&2; exit 2 ;;
  esac
  shift
done
carry="$root/gpu-carry"
mkdir -p "$out/logs"
table="$out/proof.md"
start=$(date +%s)
failed=0
py="${PYTHON:-python3}"  # the machine's Python with torch and nanobind
export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RCKPT_CLI_BINARY="$carry/bin/rckpt" RCKPT_DEMO_BINARY="$carry/bin/rckpt-train-demo"

{
  echo "# rckpt GPU proof, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "| step | result | seconds | note |"
  echo "|---|---|---|---|"
} > "$table"

# row NAME RESULT SECONDS NOTE
row() {
  echo "| $1 | $2 | $3 | $4 |" >> "$table"
  echo "== $1: $2 ($3 s) $4"
}

# step NAME FAIL_FAST COMMAND...: runs it with its output in logs/NAME.log.
step() {
  local name="$1" fail_fast="$2"
  shift 2
  local t0=$(date +%s) log="$out/logs/$name.log"
  if "$@" >"$log" 2>&1; then
    row "$name" PASS $(( $(date +%s) - t0 )) "$(tail -1 "$log" | tr '|' '/' | cut -c1-160)"
    return 0
  fi
  failed=1
  row "$name" FAIL $(( $(date +%s) - t0 )) "$(tail -1 "$log" | tr '|' '/' | cut -c1-160) (logs/$name.log)"
  tail -30 "$log"
  if [ "$fail_fast" = 1 ]; then
    echo "proof: stopped at $name ($(( $(date +%s) - start )) s)"
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
  "$py" -c "import sys, torch, numpy, nanobind, pytest; print('python', sys.version.split()[0], \
'torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())" || return 1
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader || echo "nvidia-smi: not found"
}
step environment 1 check_carry

# 2. Smoke: the doctor and one load onto the GPU, before anything long.
doctor_log="$out/logs/doctor.log"
"$carry/bin/rckpt" doctor >"$doctor_log" 2>&1
doctor_rc=$?
if grep -q "^devices: none" "$doctor_log"; then
  if [ "$dry" = 1 ] && [ "$doctor_rc" = 0 ]; then
    row smoke "no GPU here" 0 "$(grep '^devices' "$doctor_log" | cut -c1-160)"
    no_gpu=1
  else
    row smoke FAIL 0 "$(grep -E '^devices|PROBLEM' "$doctor_log" | tr '\n' ' ' | cut -c1-160)"
    cat "$doctor_log"
    exit 1
  fi
else
  no_gpu=0
  if [ "$doctor_rc" != 0 ]; then
    row smoke FAIL 0 "rckpt doctor exit $doctor_rc: $(grep PROBLEM "$doctor_log" | cut -c1-160)"
    cat "$doctor_log"
    exit 1
  fi
  step smoke 1 "$carry/bin/rckpt" load --model-device cuda:0 \
    "$root/tests/data/golden/v1.0-training-state.rckpt"
fi

# 3. The Python extension for this machine's Python and torch.
pybuild="$out/build-python"
configure() {
  cmake -S "$root" -B "$pybuild" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$carry/deps" -DRCKPT_PYTHON="$(command -v "$py")" -DRCKPT_BUILD_PYTHON=ON \
    -DRCKPT_BUILD_TESTS=OFF -DRCKPT_BUILD_EXAMPLES=OFF -DRCKPT_BUILD_BENCH=OFF \
    -DRCKPT_ENABLE_MPI=OFF
}
# Every header of zstd, xxHash and FlatBuffers an object used came from
# gpu-carry/ (the machine has none of them; a build here must not find the
# system's).
deps_from_carry() {
  local deps
  deps="$(ninja -C "$pybuild" -t deps)"
  if echo "$deps" | grep -E '/(zstd|xxhash|flatbuffers/[a-z_]+)\.h$' | grep -v "$carry/deps/" | grep -q .; then
    echo "headers from outside gpu-carry/:"
    echo "$deps" | grep -E '/(zstd|xxhash|flatbuffers/[a-z_]+)\.h$' | grep -v "$carry/deps/" | sort -u | head
    return 1
  fi
  echo "$(echo "$deps" | grep -cE "$carry/deps/include/") dependency headers, all from gpu-carry/"
}
build_extension() {
  configure || return 1
  if [ "$dry" = 1 ]; then
    # The objects that use each carried dependency (flatc generates the
    # schema header), not the whole library: CI's time is short.
    ninja -C "$pybuild" src/CMakeFiles/rckpt.dir/codec/codec.cc.o \
      src/CMakeFiles/rckpt.dir/format/manifest.cc.o src/CMakeFiles/rckpt.dir/format/file_reader.cc.o || return 1
  else
    cmake --build "$pybuild" -j "$(nproc)" --target rckpt_python_package rckpt_cli || return 1
  fi
  deps_from_carry
}
step extension 1 build_extension
export PYTHONPATH="$pybuild/python${PYTHONPATH:+:$PYTHONPATH}"

if [ "$no_gpu" = 1 ]; then
  row "device steps" "not run" 0 "no GPU here: the proof stops before the steps that need one"
  echo "proof: dry run complete, no GPU here ($(( $(date +%s) - start )) s); the table is $table"
  exit 0
fi

step "python doctor" 1 "$py" -m rckpt doctor

# 4. The C++ GPU suites: a skip is a failure.
step "C++ gpu tests" 0 "$carry/bin/gpu_tests" --require-gpu
step "C++ restart on the GPU" 0 "$carry/bin/restart_gpu_tests" --require-gpu

# 5. The Python CUDA suite against this machine's torch.
step "python CUDA suite" 0 env RCKPT_REQUIRE_GPU=1 RCKPT_CLI="$carry/bin/rckpt" \
  RCKPT_TEST_DATA_DIR="$root/tests/data" RCKPT_SOURCE_DIR="$root" \
  "$py" -m pytest -q -ra -p no:cacheprovider -m gpu "$root/tests/python/test_gpu.py"

# 6. hippynn trained on cuda:0, resumed on cuda:0 and on the CPU.
site="$out/site"
step "hippynn install" 0 "$py" -m pip install -q --no-deps --no-index --target "$site" \
  "$carry"/wheels/hippynn-*.whl
for resume in cuda:0 cpu; do
  step "hippynn cuda:0 -> $resume" 0 env PYTHONPATH="$PYTHONPATH:$site" \
    "$py" "$root/tests/hippynn/restart_scenario.py" --device cuda:0 --resume-on "$resume"
done

# 7-8. Throughput and stall rows, in results.md as each finishes.
step "load throughput" 0 "$py" "$root/bench/gpu_bench.py" load --mib "$mib" --table "$out/results.md" \
  --json "$out/load.json" --dir "$out/files"
step "save_async stall" 0 "$py" "$root/bench/gpu_bench.py" stall --gib "$state_gib" \
  --table "$out/results.md" --json "$out/stall.json" --dir "$out/files"
rm -rf "$out/files"

echo "proof: $( [ "$failed" = 0 ] && echo passed || echo FAILED ) in $(( $(date +%s) - start )) s;" \
     "the table is $table"
exit "$failed"
