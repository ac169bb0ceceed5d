#!/bin/sh
# RedLock over three fresh servers. By hand, start them first: `redis-server --port 7001
# --save '' --daemonize yes`, then 7002 and 7003 (//tests/cli:redlock_quickstart_test runs
# these lines on its own servers: free ports in PORT_A/B/C, `dlock` on PATH).
servers="--redis redis://127.0.0.1:${PORT_A:-7001} --redis redis://127.0.0.1:${PORT_B:-7002} --redis redis://127.0.0.1:${PORT_C:-7003}"
# Brand-new servers refuse to grant for one restart window (60 s): nothing tells them from
# servers that restarted empty and forgot their locks. dlock says so and names the way out.
dlock run $servers inv -- echo ran; echo "exit $?"   # exit 69, "dlock trust --force ..."
dlock check $servers; echo "exit $?"                  # WARN: young, the same advice
# Only for servers that never held locks, never right after a restart that lost data:
dlock trust --force $servers
dlock run $servers inv -- echo ran                    # ran
