#!/bin/sh
# Runs the binary given as $1 (plus any flags) as a test: it checks its own
# outcome and exits 0 only if it behaved.
exec "$@"
