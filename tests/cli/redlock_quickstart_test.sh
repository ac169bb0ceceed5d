#!/bin/sh
# Runs the README's RedLock quick start (redlock_quickstart.sh, shown verbatim in README.md
# and checked by tools/check_readme_snippets) on three fresh redis-servers without
# persistence, and checks what the README says happens: the first run is refused with exit
# 69 and the `dlock trust --force` line, `dlock check` warns with the same advice, and after
# the trust step the command runs and leaves no lock key behind.
#   $1: the dlock binary   $2: redlock_quickstart.sh
set -u
dlock_bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
script="$2"
dir=$(mktemp -d /tmp/dlock-redlock-quickstart-XXXXXX) || exit 1
mkdir "$dir/bin" && ln -s "$dlock_bin" "$dir/bin/dlock"
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- output"; cat "$dir/out.txt" 2>/dev/null; exit 1; }

# start_server NAME: a fresh redis-server (no persistence) on a free loopback port; prints
# the port. A port taken between the probe and the bind is retried with another.
start_server() {
  for attempt in 1 2 3 4 5; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    mkdir -p "$dir/$1"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir/$1" --save '' --appendonly no \
      --daemonize no --logfile "$dir/$1.log" &
    pid=$!
    i=0
    while [ "$i" -lt 200 ]; do
      if ! kill -0 "$pid" 2>/dev/null; then break; fi
      if redis-cli -p "$port" ping >/dev/null 2>&1; then
        pids="$pids $pid"; eval "port_$1=$port"; return 0
      fi
      i=$((i + 1)); sleep 0.05
    done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  done
  echo "redis-server did not start:"; cat "$dir/$1.log"; exit 1
}
start_server a; start_server b; start_server c

PATH="$dir/bin:$PATH" PORT_A=$port_a PORT_B=$port_b PORT_C=$port_c sh "$script" \
  >"$dir/out.txt" 2>&1
rc=$?
cat "$dir/out.txt"
trust="dlock trust --force --redis redis://127.0.0.1:$port_a --redis redis://127.0.0.1:$port_b --redis redis://127.0.0.1:$port_c"
[ "$rc" -eq 0 ] || fail "the quick start exited $rc"
# The refusal of the first run, with the way out: how long is left and the exact trust line.
grep -q "^exit 69$" "$dir/out.txt" || fail "the first run on fresh servers was not refused with 69"
grep -q "refuse acquires for about another" "$dir/out.txt" || fail "the refusal does not say how long is left"
grep -qxF "  $trust" "$dir/out.txt" || fail "the refusal does not name: $trust"
# dlock check: each young data set is a WARN naming that server's trust line.
for p in $port_a $port_b $port_c; do
  grep -F "WARN" "$dir/out.txt" | grep -F "young" |
    grep -qF "dlock trust --force --redis redis://127.0.0.1:$p " ||
    fail "dlock check does not warn about the young data set on port $p with the trust line"
done
[ "$(grep -c "^ran$" "$dir/out.txt")" -eq 1 ] || fail "the command did not run exactly once"
for p in $port_a $port_b $port_c; do
  [ "$(redis-cli -p "$p" exists 'dlock:{inv}')" = 0 ] || fail "lock key left on port $p"
  [ "$(redis-cli -p "$p" get dlock:data-set-began)" = 0 ] || fail "port $p not trusted"
done
echo "PASS"
