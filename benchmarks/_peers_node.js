// node-redlock's side of benchmarks/peers.py: the same workloads, driven over
// stdin/stdout, one JSON object per line each way. peers.py copies this file
// into its cache directory (beside node_modules) and runs it with `node`.
"use strict";
const Redis = require("ioredis");
const RedlockModule = require("redlock");
const Redlock = RedlockModule.default || RedlockModule;
const fs = require("fs");
const path = require("path");
const readline = require("readline");
const { performance } = require("perf_hooks");

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const errors = { redlock: 0, client: 0 };
const sets = {};

function percentile(samples, q) {
  if (samples.length === 0) return 0;
  const ordered = [...samples].sort((a, b) => a - b);
  const rank = Math.max(0, Math.min(ordered.length - 1, Math.round((q / 100) * ordered.length) - 1));
  return ordered[rank];
}

function make(ports) {
  const clients = ports.map((port) => {
    const client = new Redis({ host: "127.0.0.1", port });
    client.on("error", () => errors.client++); // unhandled, an emitter's error would crash us
    return client;
  });
  // One attempt for the one-shot workloads; the library's defaults for waiting.
  const once = new Redlock(clients, { retryCount: 0 });
  const waiting = new Redlock(clients);
  for (const redlock of [once, waiting]) redlock.on("error", () => errors.redlock++);
  return { clients, once, waiting };
}

// Workloads 1, 2 and 4: `tasks` loops, each acquire+release on a fresh name per cycle.
async function rate(set, tasks, seconds, grace, tag) {
  const deadline = performance.now() + seconds * 1000;
  let done = 0, refused = 0, failed = 0;
  async function loop(task) {
    for (let i = 0; performance.now() < deadline; i++) {
      let lock;
      try {
        lock = await set.once.acquire([`peers:${tag}:${task}:${i}`], 10000);
      } catch (e) {
        refused++;
        continue;
      }
      try {
        await lock.release();
        if (performance.now() < deadline) done++;
      } catch (e) {
        failed++;
      }
    }
  }
  const all = Promise.all(Array.from({ length: tasks }, (_, t) => loop(t)));
  const stalled = await Promise.race([
    all.then(() => false),
    sleep((seconds + grace) * 1000).then(() => true),
  ]);
  return { ops_per_s: done / seconds, refused, failed, stalled };
}

// Workload 3: `workers` loops on one name, each holding it `hold` seconds.
async function oneName(set, workers, seconds, grace, hold) {
  const deadline = performance.now() + seconds * 1000;
  const per = new Array(workers).fill(0);
  const waits = [], handoffs = [];
  let lastHolder = -1, releaseCalled = 0, failed = 0, longest = 0;
  async function worker(me) {
    while (performance.now() < deadline) {
      const wanted = performance.now();
      let lock = null;
      while (lock === null) {
        try {
          lock = await set.waiting.acquire(["peers:one"], 10000);
        } catch (e) {
          if (performance.now() >= deadline) {
            longest = Math.max(longest, deadline - wanted);
            return; // gave up after its retries, and the round is over
          }
        }
      }
      const now = performance.now();
      if (now < deadline) {
        per[me]++;
        waits.push(now - wanted);
        if (lastHolder !== -1 && lastHolder !== me) handoffs.push(now - releaseCalled);
      } else {
        longest = Math.max(longest, deadline - wanted); // cut short by the round's end
      }
      lastHolder = me;
      await sleep(hold * 1000);
      releaseCalled = performance.now();
      try {
        await lock.release();
      } catch (e) {
        failed++;
      }
    }
  }
  const all = Promise.all(Array.from({ length: workers }, (_, w) => worker(w)));
  const stalled = await Promise.race([
    all.then(() => false),
    sleep((seconds + grace) * 1000).then(() => true),
  ]);
  const grants = per.reduce((a, b) => a + b, 0);
  return {
    ops_per_s: grants / seconds,
    handoff_p50_ms: handoffs.length ? percentile(handoffs, 50) : null, // none: one worker kept it
    wait_p50_ms: percentile(waits, 50),
    wait_p99_ms: percentile(waits, 99),
    wait_max_ms: Math.max(longest, ...waits),
    busiest_share: grants ? Math.max(...per) / grants : 0,
    handoffs: handoffs.length,
    failed,
    stalled,
  };
}

async function handle(msg) {
  if (msg.op === "setup") {
    for (const [name, ports] of Object.entries(msg.sets)) sets[name] = make(ports);
    return { ok: true };
  }
  if (msg.op === "run") {
    const set = sets[msg.set];
    const result = msg.workload === "one_name"
      ? await oneName(set, msg.workers, msg.seconds, msg.grace, msg.hold)
      : await rate(set, msg.tasks, msg.seconds, msg.grace, msg.tag);
    return { ...result, errors: { ...errors } };
  }
  if (msg.op === "quit") process.exit(0);
  return { error: `unknown op ${msg.op}` };
}

// redlock's package.json is not among its exports: read it beside this file.
const installed = (name) =>
  JSON.parse(fs.readFileSync(path.join(__dirname, "node_modules", name, "package.json"))).version;
const versions = { redlock: installed("redlock"), ioredis: installed("ioredis"), node: process.version };
process.stdout.write(JSON.stringify({ ready: true, versions }) + "\n");
const lines = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
lines.on("line", (line) => {
  // One command at a time, in order: each answer is the next line out.
  queue = queue.then(async () => {
    let answer;
    try {
      answer = await handle(JSON.parse(line));
    } catch (e) {
      answer = { error: String((e && e.stack) || e) };
    }
    process.stdout.write(JSON.stringify(answer) + "\n");
  });
});
lines.on("close", () => process.exit(0));
