#!/bin/sh
# Usage: no_network_deps_test.sh [--allow-libcrypto] DEPS
# DEPS: the labels of a target's deps() (a genquery output). Fails, naming
# them, when any is a network stack: a target of @libuv, @hiredis or
# @openssl, or of //transport/uv (the only package that touches them).
# --allow-libcrypto lets @openssl//:crypto through (libcrypto alone, no
# TLS: the fake hashes scripts with its SHA-1).
set -u
allowed='^$'
if [ "$1" = "--allow-libcrypto" ]; then allowed='^@openssl//:crypto$'; shift; fi
deps="$1"
[ -s "$deps" ] || { echo "FAIL: $deps is empty or missing"; exit 1; }
bad=$(grep -E '^(@libuv//|@hiredis//|@openssl//|//transport/uv[:/])' "$deps" | grep -Ev "$allowed")
if [ -n "$bad" ]; then
  echo "FAIL: network stack in deps:"
  echo "$bad"
  exit 1
fi
echo "PASS: $(wc -l < "$deps") deps, no libuv, hiredis, OpenSSL (TLS) or //transport/uv"
