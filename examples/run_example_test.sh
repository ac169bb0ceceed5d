#!/bin/sh
# Runs one example binary (given as $1, plus any flags) as a test: the
# example checks its own outcome and exits 0 only if the scenario behaved.
# With --expect-failure first, the test passes only if the example exits 1:
# used to show that a scenario really depends on the lock (run without it,
# the example must notice the damage).
if [ "$1" = "--expect-failure" ]; then
  shift
  "$@"
  rc=$?
  if [ $rc -eq 1 ]; then
    echo "PASS: the example exited 1 without the lock, as it must"
    exit 0
  fi
  echo "FAIL: expected exit 1 without the lock, got $rc"
  exit 1
fi
exec "$@"
