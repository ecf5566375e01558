// The speed probe's child (see speed-probe.mjs): on the core under test, runs one fixed piece
// of work when asked and answers how long it took.
import { answerMessages, exitWithParent } from "./children.mjs";

/** Integer work no compiler can skip or fold: a xorshift sequence, summed. */
function work(steps) {
  let x = 2463534242;
  let sum = 0;
  for (let i = 0; i < steps; i += 1) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    sum = (sum + (x >>> 0)) % 4294967291;
  }
  return sum;
}

const STEPS = 500_000;
let sink = 0;

/** The fastest of `tries` runs of the work, in ms. */
function timed(tries) {
  let best = Infinity;
  for (let i = 0; i < tries; i += 1) {
    const start = process.hrtime.bigint();
    sink ^= work(STEPS);
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e6);
  }
  return best;
}

// Optimized before the first reading: the first runs go through V8's tiers.
timed(10);
exitWithParent();
answerMessages({ probe: ({ tries }) => ({ ms: timed(Math.max(1, Number(tries) || 3)), sink }) });
process.send({ ready: true });
