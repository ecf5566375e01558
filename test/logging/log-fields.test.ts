import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { captureLines as capture } from "./capture-lines.js";
import { createLogger } from "../../src/logging/create-logger.js";
import { logFields } from "../../src/logging/log-fields.js";

const settle = () => new Promise((done) => setImmediate(done));
/** Equal but for the time, which each line took on its own. */
const withoutTime = (text = "") => text.replace(/"time":\d+/, '"time":0');

describe("logFields", () => {
  it("writes the line pino writes for the same fields: odd strings, numbers, left-out fields", async () => {
    const odd = 'quote " backslash \\ tab \t newline \n control \u0001 unicode é 图 emoji 🎨';
    const fields = {
      task_id: "task_1",
      req_id: undefined,
      model: odd,
      run_ms: 12.5,
      bytes: Number.NaN,
      images: 0,
      replayed: false,
      channel: null,
    };
    const ours = capture();
    const theirs = capture();
    const logger = createLogger("info", ours.stream, ["sk-config-secret-0001"]).child({ r: 1 });
    const reference = createLogger("info", theirs.stream, ["sk-config-secret-0001"]).child({
      r: 1,
    });
    logFields(logger, "info", fields, "task.completed");
    logFields(logger, "warn", { task_id: "task_2" }, "task.slow");
    reference.info(fields, "task.completed");
    reference.warn({ task_id: "task_2" }, "task.slow");
    await settle();
    expect(ours.lines.map(withoutTime)).toEqual(theirs.lines.map(withoutTime));
    expect(JSON.parse(ours.lines[0] ?? "")).toMatchObject({ level: 30, model: odd, bytes: null });
    expect(ours.lines[0]).not.toContain("req_id");
  });

  it("scrubs the configuration's secrets, and leaves redacted names and objects to pino", async () => {
    const { lines, stream } = capture();
    const logger = createLogger("debug", stream, ["sk-config-secret-0001"]);
    logFields(logger, "info", { message: "echoed sk-config-secret-0001" }, "m1");
    logFields(logger, "info", { key: "sk-other-0002", task_id: "t" }, "m2");
    logFields(logger, "info", { detail: { token: "sk-other-0003" } }, "m3");
    await settle();
    expect(lines.join("\n")).not.toMatch(/sk-config-secret-0001|sk-other-0002|sk-other-0003/);
    expect(lines.map((line) => JSON.parse(line) as unknown)).toMatchObject([
      { message: "echoed [redacted]", msg: "m1" },
      { key: "[redacted]", task_id: "t", msg: "m2" },
      { detail: { token: "[redacted]" }, msg: "m3" },
    ]);
  });

  it("writes nothing below the logger's level, and leaves a logger it cannot match to pino", async () => {
    const quiet = capture();
    logFields(createLogger("warn", quiet.stream), "info", { task_id: "t" }, "hidden");
    const mixed = capture();
    logFields(pino({ mixin: () => ({ extra: 1 }) }, mixed.stream), "info", { a: "b" }, "m");
    await settle();
    expect(quiet.lines).toEqual([]);
    expect(JSON.parse(mixed.lines[0] ?? "")).toMatchObject({ a: "b", extra: 1, msg: "m" });
  });
});
