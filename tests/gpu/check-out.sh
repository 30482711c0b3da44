#!/usr/bin/env bash
# Checks what tests/gpu/proof.sh left in its output folder against what the
# device machine brings back (anything else is left out and lost with the
# machine), and against what the proof promises to leave there:
#   - at most 8 files, each at most 16 MiB, 64 MiB in all;
#   - plain files and folders only (no links, nothing else), no deeper than
#     DIR/a/b/file;
#   - every file and folder name made of letters, digits, '.', '_' and '-';
#   - results.md (the steps' table) and proof.log (the combined log, at most
#     8 MiB) present, and no checkpoint or build tree among the files;
#   - the scratch folder that proof.log names is gone (every checkpoint and
#     the build deleted), unless --scratch-may-stay;
#   - with --dry-run, the rows a dry run must leave, in order: the
#     environment, the smoke step, the carried extension, the three
#     measurements before the checks and the C++ GPU suites, then the
#     measurements' rows (each rckpt row with its unpinned leases and
#     device-unshuffled bytes in load.json, sharded.json and stall.json) and
#     the device checks' table with its six rows.
#
#   bash tests/gpu/check-out.sh DIR [--dry-run] [--scratch-may-stay]
#   bash tests/gpu/check-out.sh --self-test   (each rule rejects what breaks it)
#
# Prints every broken rule; exit 1 when there is one.
set -uo pipefail

DRY_ROWS=("environment" "smoke" "extension" "load throughput" "sharded load" "save_async stall"
          "device path checks" "C++ gpu tests" "C++ restart on the GPU" "confirmations"
          "pinned cudaMemcpyAsync (the limit)" "rckpt.load, raw chunks"
          "rckpt.load, sharded file" "rckpt.save_async"
          "busy stream: load and save do not wait for it" "pool constant over N calls"
          "pool released" "no spinning while a load waits"
          "side stream: tensor freed right after save_async"
          "control: the same free without a record")

# Every rckpt row of a measurement's JSON says what the staging did.
staging_columns() {
  python3 - "$@" <<'PY'
import json, sys
bad = []
for path in sys.argv[1:]:
    try:
        rows = json.load(open(path))
    except (OSError, ValueError) as e:
        bad.append(f"{path}: {e}")
        continue
    ours = [r for r in rows if str(r.get("case", r.get("method", ""))).startswith("rckpt")]
    if not ours:
        bad.append(f"{path}: no rckpt row")
    for r in ours:
        if "unpinned leases" not in r:
            bad.append(f"{path}: a row without its unpinned leases: {r}")
        if "case" in r and "device-unshuffled" not in r:
            bad.append(f"{path}: a row without its device-unshuffled bytes: {r}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}

check() {
  local dir="$1" scratch_may_stay="${2:-0}" dry="${3:-0}" problems=0 last=0 line r n total size rel name depth scratch
  bad() { echo "check-out: $*"; problems=$(( problems + 1 )); }
  if [ ! -d "$dir" ]; then
    echo "check-out: $dir is not a folder"
    return 1
  fi
  while IFS= read -r -d '' p; do
    rel="${p#"$dir"/}"
    if [ -L "$p" ]; then
      bad "$rel is a link (links do not come back)"
    elif [ ! -f "$p" ] && [ ! -d "$p" ]; then
      bad "$rel is neither a plain file nor a folder"
    fi
    name="$(basename "$p")"
    if ! printf '%s' "$name" | grep -qE '^[A-Za-z0-9._-]+$'; then
      bad "'$rel': names may hold only letters, digits, '.', '_' and '-'"
    fi
    depth=$(printf '%s' "$rel" | tr -cd '/' | wc -c)
    if [ -f "$p" ] && [ "$depth" -gt 2 ]; then
      bad "$rel is deeper than DIR/a/b/file"
    elif [ -d "$p" ] && [ "$depth" -gt 1 ]; then
      bad "folder $rel is deeper than DIR/a/b/"
    fi
    case "$name" in
      *.rckpt|*.pt|*.pth|*.safetensors|*.distcp|CMakeCache.txt|build.ninja)
        bad "$rel: a checkpoint or build file (they belong in the scratch folder under /tmp)" ;;
    esac
  done < <(find "$dir" -mindepth 1 -print0)
  n=0
  total=0
  while IFS= read -r -d '' f; do
    n=$(( n + 1 ))
    size=$(stat -c %s "$f")
    total=$(( total + size ))
    if [ "$size" -gt $(( 16 << 20 )) ]; then
      bad "${f#"$dir"/} is $(( size >> 20 )) MiB (16 MiB at most)"
    fi
  done < <(find "$dir" -type f -print0)
  [ "$n" -le 8 ] || bad "$n files (8 at most): $(cd "$dir" && find . -type f | sort | head -12 | tr '\n' ' ')"
  [ "$total" -le $(( 64 << 20 )) ] || bad "$(( total >> 20 )) MiB in all (64 MiB at most)"
  for f in results.md proof.log; do
    [ -s "$dir/$f" ] || bad "$f is missing or empty"
  done
  if [ -f "$dir/proof.log" ] && [ "$(stat -c %s "$dir/proof.log")" -gt $(( 8 << 20 )) ]; then
    bad "proof.log is $(( $(stat -c %s "$dir/proof.log") >> 10 )) KiB (8 MiB at most)"
  fi
  if [ -s "$dir/results.md" ]; then
    grep -q '^| step | result | seconds | note |$' "$dir/results.md" ||
      bad "results.md has no steps' table"
  fi
  if [ -s "$dir/proof.log" ] && [ "$scratch_may_stay" = 0 ]; then
    scratch="$(sed -n 's/^rckpt GPU proof: .*; scratch: \(.*\)$/\1/p' "$dir/proof.log" | head -1)"
    if [ -z "$scratch" ]; then
      bad "proof.log does not name its scratch folder"
    elif [ -e "$scratch" ]; then
      bad "the scratch folder $scratch is still there (checkpoints and the build must go)"
    fi
  fi
  if [ "$dry" = 1 ] && [ -s "$dir/results.md" ]; then
    for r in "${DRY_ROWS[@]}"; do
      line="$(grep -nF "| $r | " "$dir/results.md" | head -1 | cut -d: -f1)"
      if [ -z "$line" ]; then
        bad "results.md has no row '$r'"
      elif [ "$line" -le "$last" ]; then
        bad "results.md's row '$r' is out of order"
      else
        last="$line"
      fi
    done
    grep -qE '^\| extension \| PASS \| [0-9]+ \| .*CPython 3\.12' "$dir/results.md" ||
      bad "results.md's extension row does not say the carried extension loads in CPython 3.12"
    local json
    for json in load sharded stall; do
      if [ ! -s "$dir/$json.json" ]; then
        bad "$json.json is missing or empty"
      elif ! line="$(staging_columns "$dir/$json.json")"; then
        bad "$line"
      fi
    done
  fi
  [ "$problems" = 0 ] || return 1
  echo "check-out: $dir keeps the device machine's rules ($n files, $(( total >> 10 )) KiB)"
}

# Each rule, broken once, must be caught.
self_test() {
  local t ok=1
  t="$(mktemp -d)"
  # shellcheck disable=SC2064
  trap "rm -rf '$t'" RETURN
  good() {
    rm -rf "$t/out"
    mkdir -p "$t/out"
    printf '| step | result | seconds | note |\n' > "$t/out/results.md"
    printf 'rckpt GPU proof: now; budget 240 s; scratch: %s\n' "$t/gone" > "$t/out/proof.log"
  }
  expect() {  # expect PASS|FAIL WHAT [DRY]
    local got=PASS
    check "$t/out" 0 "${3:-0}" >"$t/msg" 2>&1 || got=FAIL
    if [ "$got" != "$1" ]; then
      echo "check-out self-test: $2: expected $1, got $got: $(cat "$t/msg")"
      ok=0
    fi
  }
  good; expect PASS "a good folder"
  good; mkdir -p "$t/out/a/b"; echo x > "$t/out/a/b/f.json"; expect PASS "DIR/a/b/file"
  good; mkdir -p "$t/out/a/b/c"; echo x > "$t/out/a/b/c/f"; expect FAIL "too deep"
  good; echo x > "$t/out/C++ gpu tests.log"; expect FAIL "a name with spaces and '+'"
  good; for i in 1 2 3 4 5 6 7; do echo x > "$t/out/f$i"; done; expect FAIL "9 files"
  good; truncate -s 17M "$t/out/big"; expect FAIL "a file over 16 MiB"
  good; ln -s results.md "$t/out/link"; expect FAIL "a link"
  good; echo x > "$t/out/s.rckpt"; expect FAIL "a checkpoint"
  good; rm "$t/out/proof.log"; expect FAIL "no combined log"
  good; echo "| a | b |" > "$t/out/results.md"; expect FAIL "no steps' table"
  good; mkdir "$t/gone"; expect FAIL "the scratch folder left behind"; rmdir "$t/gone"
  dry_rows() {  # the dry run's rows
    local r
    for r in "${DRY_ROWS[@]}"; do
      case "$r" in
        extension) echo "| extension | PASS | 1 | the carried extension loads in CPython 3.12.1 and runs |" ;;
        *) echo "| $r | PASS | 0 | x |" ;;
      esac
    done
  }
  measurements() {  # the measurements' JSON, with the staging columns unless $1 drops one
    local drop="${1:-}"
    printf '[{"case": "rckpt.load, raw chunks", "unpinned leases": 0, "device-unshuffled": 0}]' |
      sed "s/, \"$drop\": 0//" > "$t/out/load.json"
    printf '[{"case": "rckpt.load, sharded file", "unpinned leases": 0, "device-unshuffled": 0}]' \
      > "$t/out/sharded.json"
    printf '[{"method": "rckpt.save_async", "saves": "first", "unpinned leases": 0}]' \
      > "$t/out/stall.json"
  }
  good; dry_rows >> "$t/out/results.md"; measurements; expect PASS "the dry run's rows" 1
  good; dry_rows | grep -v "^| extension" >> "$t/out/results.md"; measurements
  expect FAIL "no extension row" 1
  good; dry_rows | sed 's/CPython 3.12.1/CPython 3.11.7/' >> "$t/out/results.md"; measurements
  expect FAIL "an extension for another Python" 1
  good; dry_rows | sed '/^| load throughput /{h;d};/^| device path checks /{G}' >> "$t/out/results.md"
  measurements; expect FAIL "a measurement after the device checks" 1
  good; dry_rows | sed '/^| save_async stall /{h;d};/^| C++ restart/{G}' >> "$t/out/results.md"
  measurements; expect FAIL "a measurement after a C++ suite" 1
  good; dry_rows | grep -v "side stream" >> "$t/out/results.md"; measurements
  expect FAIL "no side-stream row" 1
  good; dry_rows >> "$t/out/results.md"; measurements "unpinned leases"
  expect FAIL "a row without its unpinned leases" 1
  good; dry_rows >> "$t/out/results.md"; measurements "device-unshuffled"
  expect FAIL "a row without its device-unshuffled bytes" 1
  good; dry_rows >> "$t/out/results.md"; measurements; rm "$t/out/stall.json"
  expect FAIL "no stall rows" 1
  good; truncate -s 9M "$t/out/proof.log"; expect FAIL "a proof.log over 8 MiB"
  [ "$ok" = 1 ] && echo "check-out self-test: every rule catches what breaks it"
  [ "$ok" = 1 ]
}

case "${1:-}" in
  --self-test) self_test ;;
  ""|-*) echo "usage: $0 DIR [--dry-run] [--scratch-may-stay] | --self-test" >&2; exit 2 ;;
  *)
    dir="$1" may=0 dry=0
    shift
    for a in "$@"; do
      case "$a" in
        --scratch-may-stay) may=1 ;;
        --dry-run) dry=1 ;;
        *) echo "usage: $0 DIR [--dry-run] [--scratch-may-stay] | --self-test" >&2; exit 2 ;;
      esac
    done
    check "$dir" "$may" "$dry" ;;
esac
