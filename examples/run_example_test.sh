#!/bin/sh
# Runs one example binary (given as $1, plus any flags) as a test: the
# example checks its own outcome and exits 0 only if the scenario behaved.
exec "$@"
