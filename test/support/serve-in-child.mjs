// Runs the built service (dist/) in its own process for tests that measure it from outside:
// the config comes as JSON in argv[2]; the process reports its URL, then answers "memory"
// messages with the peak of process.memoryUsage() since the last "reset", sampled every 200 ms
// between the two right after a garbage collection (run with --expose-gc): memory the service holds, not garbage
// it has not collected yet.
import { startServer } from "../../dist/server.js";
import { parseConfig } from "../../dist/config/load-config.js";
import { pino } from "pino";

const running = await startServer({
  config: parseConfig(JSON.parse(process.argv[2])),
  logger: pino({ level: "silent" }),
  defaultMetrics: false,
});
let peak = { rss: 0, arrayBuffers: 0, heapUsed: 0 };
const sample = () => {
  const usage = process.memoryUsage();
  peak = {
    rss: Math.max(peak.rss, usage.rss),
    arrayBuffers: Math.max(peak.arrayBuffers, usage.arrayBuffers),
    heapUsed: Math.max(peak.heapUsed, usage.heapUsed),
  };
};
// Array buffers freed by a collection are swept in the background: collect, give the sweeper
// a moment, collect again, then read.
const settled = () =>
  new Promise((resolveSettled) => {
    globalThis.gc?.();
    setTimeout(() => {
      globalThis.gc?.();
      resolveSettled();
    }, 10);
  });
// Sampled only from a "reset" to the "memory" that reads the peak, every 200 ms (a 30 MB upload
// at 20 MB/s is sampled some eight times): two full collections a sample cost CPU for as long as
// they run, and run for the process's whole life they cost a loaded CI run some 25 CPU-seconds.
let sampling;
process.on("message", (message) => {
  if (message === "reset") {
    clearInterval(sampling);
    void settled().then(() => {
      peak = { rss: 0, arrayBuffers: 0, heapUsed: 0 };
      sample();
      sampling = setInterval(() => void settled().then(sample), 200).unref();
      process.send({ baseline: peak });
    });
  }
  if (message === "memory") {
    clearInterval(sampling);
    void settled().then(() => {
      sample();
      process.send({ peak });
    });
  }
  if (message === "stop") void running.close(500).then(() => process.exit(0));
});
process.send({ url: running.url });
