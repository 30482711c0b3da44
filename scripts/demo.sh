#!/usr/bin/env bash
# Installs what is missing, builds rckpt, then writes a sample checkpoint,
# inspects it, verifies it, plans and runs a load on two emulated GPUs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
BUILD_DIR="$root/build" bash scripts/build.sh
rckpt="$root/build/tools/rckpt"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
ck="$root/tests/data/golden/v1.0-training-state.rckpt"
echo; echo "== rckpt inspect (a checkpoint saved on cuda:1)"; "$rckpt" inspect "$ck"
echo; echo "== rckpt verify"; "$rckpt" verify "$ck"
echo; echo "== rckpt plan, as stored, on this machine"; "$rckpt" plan "$ck" || echo "(exit $? — as expected without cuda:1)"
echo; echo "== rckpt plan --model-device auto"; "$rckpt" plan "$ck" --model-device auto
echo; echo "== rckpt load on 2 emulated GPUs"; "$rckpt" load "$ck" --emulate-devices 2
