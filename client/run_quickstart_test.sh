#!/bin/sh
# Runs one quick-start binary ($1) against a private redis-server listening
# only on a unix socket in a fresh directory (no port to collide on), and
# checks that it exits 0 and printed what the README says it prints.
set -u
bin="$1"
dir=$(mktemp -d /tmp/dlock-quickstart-XXXXXX) || exit 1
sock="$dir/redis.sock"
redis-server --port 0 --unixsocket "$sock" --dir "$dir" --save '' --appendonly no \
  --daemonize no --logfile "$dir/redis.log" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
i=0
until redis-cli -s "$sock" ping >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -gt 200 ]; then echo "redis-server did not start:"; cat "$dir/redis.log"; exit 1; fi
  sleep 0.05
done
# A never-used server: declare its data set trusted (fences start at 1).
redis-cli -s "$sock" set dlock:data-set-began 0 >/dev/null
"$bin" --redis "unix://$sock" > "$dir/out.txt" 2>&1
rc=$?
cat "$dir/out.txt"
[ "$rc" -eq 0 ] || { echo "FAIL: $bin exited $rc"; exit 1; }
grep -q "fence 1$" "$dir/out.txt" || { echo "FAIL: no 'fence 1' line"; exit 1; }
case "$bin" in
  *quickstart_blocking)
    grep -q "second TryLock: ABORTED" "$dir/out.txt" || { echo "FAIL: rival not refused"; exit 1; }
    grep -q "released; TryLock now: OK" "$dir/out.txt" || { echo "FAIL: not released"; exit 1; } ;;
  *quickstart_async)
    grep -q "step 5: held 2000 ms" "$dir/out.txt" || { echo "FAIL: work did not finish"; exit 1; }
    grep -q "released: OK" "$dir/out.txt" || { echo "FAIL: not released"; exit 1; }
    grep -q "uv_loop_close: 0" "$dir/out.txt" || { echo "FAIL: loop not closed"; exit 1; } ;;
esac
[ "$(redis-cli -s "$sock" exists 'dlock:{quickstart/report}' 'dlock:{quickstart/async}')" = 0 ] ||
  { echo "FAIL: a lock key was left behind"; exit 1; }
echo "PASS"
