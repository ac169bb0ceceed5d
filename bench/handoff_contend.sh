#!/usr/bin/env bash
# Issue 23 goal 4 (docs/handoff.md, bench/profiles/handoff.md): separate
# clients contending, before/after, interleaved within one session.
#   bench/handoff_contend.sh <lock_bench before> <lock_bench after> <out.jsonl>
# Env: TOTAL (critical sections per row, default 2000), REPS (3), CLIENTS
# ("8 32"). One redis-server pinned to CPU 0, the client to CPU 1 (as
# bench/run). Per rep and client count: raw sync pollers (1 ms), dlock
# before, dlock after; each row's server work from INFO commandstats
# (CONFIG RESETSTAT before the row) in the "stats" field.
set -u
BEFORE=$1; AFTER=$2; OUT=$3
TOTAL=${TOTAL:-2000}; REPS=${REPS:-3}; CLIENTS=${CLIENTS:-"8 32"}
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
dir=$(mktemp -d)
taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$dir" --logfile "$dir/log" &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
redis-cli -p "$port" set dlock:data-set-began 0 nx >/dev/null
: >"$OUT"
for rep in $(seq "$REPS"); do
  for c in $CLIENTS; do
    for row in "raw-sync|$AFTER|--peer hiredis-raw --api sync --workers $c" \
               "dlock-before|$BEFORE|--peer dlock --api async --clients $c" \
               "dlock-after|$AFTER|--peer dlock --api async --clients $c"; do
      IFS='|' read -r name bin args <<<"$row"
      redis-cli -p "$port" config resetstat >/dev/null
      # shellcheck disable=SC2086
      line=$(timeout 600 taskset -c 1 "$bin" --ports "$port" --workload contend \
        --total "$TOTAL" $args 2>&1 | tail -1)
      stats=$(redis-cli -p "$port" info commandstats | tr -d '\r' | grep '^cmdstat_' |
        sed -E 's/^cmdstat_([a-z|]+):calls=([0-9]+).*/"\1":\2/' | paste -sd, -)
      echo "{\"row\":\"$name\",\"clients\":$c,\"rep\":$rep,\"stats\":{$stats},\"out\":$line}" >>"$OUT"
      echo "$rep $c $name $line" >&2
    done
  done
done
