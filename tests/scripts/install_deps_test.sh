#!/usr/bin/env bash
# scripts/install-deps.sh: --pip is the set pip's build needs and nothing of
# the test tools; both sets print what they check and what they install;
# --dry-run installs nothing; an unknown option is refused. dpkg-query,
# apt-get and sudo are stand-ins on PATH: no package is really installed.
set -euo pipefail
src="$1"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
# Nothing is installed; apt-get records what it was asked for.
printf '#!/bin/sh\nexit 1\n' >"$tmp/bin/dpkg-query"
printf '#!/bin/sh\necho "apt-get $*" >>"%s/apt.log"\n' "$tmp" >"$tmp/bin/apt-get"
printf '#!/bin/sh\nexec "$@"\n' >"$tmp/bin/sudo"
chmod +x "$tmp/bin/"*
run() { PATH="$tmp/bin:$PATH" bash "$src/scripts/install-deps.sh" "$@"; }
fail() { echo "FAIL: $*"; exit 1; }

pip_out="$(run --pip --dry-run)"
echo "$pip_out"
pip_set="$(echo "$pip_out" | sed -n 's/^install-deps (pip install .): //p')"
[ -n "$pip_set" ] || fail "--pip does not print its set"
for p in cmake g++ pkg-config libzstd-dev libflatbuffers-dev flatbuffers-compiler libxxhash-dev \
         libcurl4-openssl-dev libssl-dev libpugixml-dev \
         python3-dev python3-venv python3-pip; do
  [[ " $pip_set " == *" $p "* ]] || fail "the pip set lacks $p"
done
for p in clang libclang-rt-14-dev libgtest-dev libgmock-dev libopenmpi-dev openmpi-bin; do
  [[ " $pip_set " != *" $p "* ]] || fail "the pip set has $p, which only the tests need"
done
echo "$pip_out" | grep -q "^install-deps: would install: $pip_set\$" ||
  fail "--dry-run does not say what it would install"
[ ! -e "$tmp/apt.log" ] || fail "--dry-run ran apt-get: $(cat "$tmp/apt.log")"

full_set="$(run --dry-run | sed -n 's/^install-deps (build and test): //p')"
for p in $pip_set clang libgtest-dev libopenmpi-dev; do
  [[ " $full_set " == *" $p "* ]] || fail "the full set lacks $p"
done

# Extra packages join the set, and without --dry-run what is missing is installed.
run --pip python3-torch >"$tmp/out" || fail "install failed: $(cat "$tmp/out")"
grep -q "^install-deps: installing: $pip_set python3-torch\$" "$tmp/out" ||
  fail "it does not print what it installs: $(cat "$tmp/out")"
grep -q "install -y -qq --no-install-recommends $pip_set python3-torch\$" "$tmp/apt.log" ||
  fail "apt-get was asked for something else: $(cat "$tmp/apt.log")"

if run --pipp 2>"$tmp/err"; then fail "an unknown option was accepted"; fi
grep -q "unknown option '--pipp'" "$tmp/err" || fail "the refusal does not name the option"
echo "ok: install-deps.sh --pip installs the build's packages alone"
