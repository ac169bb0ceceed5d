#!/usr/bin/env python3
"""A real Prometheus server scrapes the metrics example; its HTTP API must
then return dlock's series with the values the example's rounds produce.

Starts //examples:metrics_example (which starts its own redis-servers and
serves /metrics on a free loopback port), writes a temporary prometheus.yml
that scrapes it every second, starts `prometheus` (Debian package, loopback
only, storage under $TEST_TMPDIR), and polls /api/v1/query until every
expected series has its value or a deadline passes. Every process it
started is stopped on every path (normal end, failure, SIGTERM from Bazel's
timeout); children also get PR_SET_PDEATHSIG so they die with the test.

Usage: prometheus_scrape_test.py --example PATH [--rounds N]
"""

import argparse
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

DEADLINE_SECONDS = 120


def die_with_parent():
    # PR_SET_PDEATHSIG = 1: the child gets SIGKILL when this test dies.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def tail(path, n=3000):
    try:
        with open(path, "rb") as f:
            data = f.read()
        return data[-n:].decode(errors="replace")
    except OSError as e:
        return f"<{e}>"


class Failure(Exception):
    pass


def stop(proc, name):
    """SIGTERM, then SIGKILL after 10 s; returns the exit code."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            print(f"{name} ignored SIGTERM; killing it")
            proc.kill()
            proc.wait()
    return proc.returncode


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--example", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n = args.rounds

    # Bazel ends a test that times out with SIGTERM: turn it into an
    # exception so the finally block below stops the children.
    def on_term(signum, frame):
        raise Failure(f"got signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    prometheus_bin = shutil.which("prometheus")
    if prometheus_bin is None:
        print("FAIL: `prometheus` is not on PATH (tools/setup installs the Debian package)")
        return 1

    tmp = os.environ.get("TEST_TMPDIR") or os.path.abspath("scrape_tmp")
    os.makedirs(tmp, exist_ok=True)
    port_file = os.path.join(tmp, "example.port")
    example_log = os.path.join(tmp, "example.log")
    prometheus_log = os.path.join(tmp, "prometheus.log")
    example = prometheus = None
    ok = False
    try:
        with open(example_log, "wb") as log:
            example = subprocess.Popen(
                [args.example, f"--rounds={n}", f"--port_file={port_file}",
                 "--serve_for=600s"],
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not os.path.exists(port_file):
            if example.poll() is not None:
                raise Failure(f"the example exited with {example.returncode} before serving")
            if time.monotonic() > deadline:
                raise Failure("the example never wrote its port")
            time.sleep(0.1)
        with open(port_file) as f:
            example_port = int(f.read().strip())
        target = f"127.0.0.1:{example_port}"
        print(f"example serves http://{target}/metrics")

        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: dlock_example
    static_configs:
      - targets: ['{target}']
""")
        # The port is free when picked; another process could take it before
        # Prometheus binds it, so retry with a new one if Prometheus exits.
        for attempt in range(3):
            prom_port = free_port()
            with open(prometheus_log, "wb") as log:
                prometheus = subprocess.Popen(
                    [prometheus_bin, f"--config.file={config}",
                     f"--storage.tsdb.path={os.path.join(tmp, 'tsdb')}",
                     f"--web.listen-address=127.0.0.1:{prom_port}"],
                    stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
            api = f"http://127.0.0.1:{prom_port}"
            ready = False
            while time.monotonic() < deadline and prometheus.poll() is None:
                try:
                    status, _ = http_get(f"{api}/-/ready")
                    if status == 200:
                        ready = True
                        break
                except (urllib.error.URLError, ConnectionError, OSError):
                    pass
                time.sleep(0.2)
            if ready:
                break
            stop(prometheus, "prometheus")
            prometheus = None
            print(f"prometheus did not come up (attempt {attempt + 1}):\n{tail(prometheus_log)}")
        if prometheus is None:
            raise Failure("prometheus never became ready")
        print(f"prometheus ready on {api}")

        def query(q):
            url = f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": q})
            _, body = http_get(url)
            reply = json.loads(body)
            if reply.get("status") != "success":
                raise Failure(f"query {q} failed: {body}")
            return [(r["metric"], float(r["value"][1])) for r in reply["data"]["result"]]

        job = 'job="dlock_example"'
        # (PromQL, check over the result list, what it means)
        checks = [
            (f'up{{{job}}}', lambda r: len(r) == 1 and r[0][1] == 1, "the target is up"),
            (f'dlock_acquire_total{{{job},policy="retry",outcome="ok"}}',
             lambda r: len(r) == 1 and r[0][1] == n, f"{n} waits through RetryLock"),
            (f'dlock_acquire_total{{{job},policy="simple",outcome="ok"}}',
             lambda r: len(r) == 1 and r[0][1] == 2 * n + 1,
             f"{2 * n + 1} SimpleLock grants (A's {n}, B's {n}, the leader)"),
            (f'dlock_acquire_total{{{job},policy="simple",outcome="aborted"}}',
             lambda r: len(r) == 1 and r[0][1] >= n, f">= {n} busy tries"),
            (f'dlock_acquire_total{{{job},policy="redlock",outcome="ok"}}',
             lambda r: len(r) == 1 and r[0][1] == n, f"{n} RedLock grants"),
            (f'dlock_redlock_votes_total{{{job},op="acquire",outcome="ok"}}',
             lambda r: len(r) == 3 and all(v == n for _, v in r),
             f"3 servers voted yes {n} times each"),
            (f'dlock_acquire_latency_seconds_count{{{job},policy="simple",outcome="ok"}}',
             lambda r: len(r) == 1 and r[0][1] == 2 * n + 1, "one latency sample per grant"),
            (f'dlock_leases_held{{{job}}}', lambda r: len(r) == 1 and r[0][1] == 1,
             "the leader lease is held"),
            # Renewed every second while the example serves: the scrapes
            # see it grow, so they are live, not one stale sample.
            (f'dlock_renewal_total{{{job},outcome="ok"}}',
             lambda r: len(r) == 1 and r[0][1] >= 5, ">= 5 watchdog renewals"),
            (f'dlock_renewal_margin_seconds_count{{{job},outcome="ok"}}',
             lambda r: len(r) == 1 and r[0][1] >= 5, "a margin sample per renewal"),
            # No resource name ever becomes a label.
            (f'count({{__name__=~"dlock_.+",{job},resource!=""}})', lambda r: r == [],
             "no series has a resource label"),
        ]
        last = {}
        while True:
            failing = []
            for q, check, meaning in checks:
                try:
                    result = query(q)
                except (urllib.error.URLError, ConnectionError, OSError) as e:
                    result = f"<{e}>"
                last[q] = result
                if isinstance(result, str) or not check(result):
                    failing.append((q, meaning))
            if not failing:
                break
            if example.poll() is not None:
                raise Failure(f"the example exited with {example.returncode} while serving")
            if time.monotonic() > deadline:
                for q, meaning in failing:
                    print(f"NOT MET: {meaning}: {q} -> {last[q]}")
                raise Failure(f"{len(failing)} checks not met within {DEADLINE_SECONDS}s")
            time.sleep(0.5)
        for q, _, meaning in checks:
            print(f"ok: {meaning}: {q} -> {[v for _, v in last[q]]}")

        # SIGTERM ends the example's serving; it releases the leader lease,
        # stops its redis-servers and exits 0.
        code = stop(example, "example")
        example = None
        if code != 0:
            raise Failure(f"the example exited with {code} after SIGTERM")
        ok = True
    except Failure as e:
        print(f"FAIL: {e}")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop(prometheus, "prometheus")
        stop(example, "example")
        if not ok:
            print(f"--- example log (tail) ---\n{tail(example_log)}")
            print(f"--- prometheus log (tail) ---\n{tail(prometheus_log)}")
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
