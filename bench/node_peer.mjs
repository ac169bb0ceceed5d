// bench/node_peer.mjs: the node `redlock` 5 (+ ioredis 5) peer row of
// bench/run. Runs N sequential acquire+release cycles of a fresh resource
// against the given ports (1 port: a single-instance lock; 3 or 5: RedLock)
// and prints one JSON line in lock_bench's format. bench/run installs the
// packages into a temporary directory and runs this file from there.
//
//   node node_peer.mjs --ports 7001,7002,7003 --n 10000 --warmup 500
import { performance } from "node:perf_hooks";
import Redis from "ioredis";
import Redlock from "redlock";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
    return acc;
  }, []));
const ports = String(args.ports || "6379").split(",").map(Number);
const n = Number(args.n || 10000);
const warmup = Number(args.warmup || 500);
const ttl = Number(args.ttl_ms || 30000);
const host = args.host || "127.0.0.1";

const clients = ports.map((port) => new Redis({ host, port, lazyConnect: true }));
await Promise.all(clients.map((c) => c.connect()));
// No retries: one attempt per cycle, as lock_bench's seq workload.
const redlock = new Redlock(clients, { retryCount: 0, driftFactor: 0.01 });
redlock.on("error", () => {});
const prefix = `bench:node:${process.pid}:${Date.now()}:`;

let failed = 0;
async function cycles(count, tag, lat) {
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    try {
      const lock = await redlock.acquire([`${prefix}${tag}${i}`], ttl);
      await lock.release();
    } catch (e) {
      failed++;
    }
    if (lat) lat.push((performance.now() - t0) * 1000);
  }
}

await cycles(warmup, "warm:", null);
failed = 0;
const lat = [];
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await cycles(n, "", lat);
const wall = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
lat.sort((a, b) => a - b);
const pct = (q) => lat[Math.max(0, Math.ceil(q * lat.length) - 1)];
const out = {
  peer: "node-redlock", api: "async", workload: "seq", instances: ports.length,
  n, wall_s: wall, cycles_per_s: n / wall, p50_us: pct(0.5), p99_us: pct(0.99),
  client_cpu_us_per_cycle: (cpu.user + cpu.system) / n,
  peak_rss_kb: Math.round(process.resourceUsage().maxRSS), failed,
};
process.stdout.write(JSON.stringify(out) + "\n");
await Promise.all(clients.map((c) => c.quit()));
