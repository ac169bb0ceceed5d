#!/bin/sh
# Runs a Python 3 test script (given as $1, plus its flags) with the
# system's python3 (tools/setup installs it).
PY=python3
if [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; fi
exec "$PY" "$@"
