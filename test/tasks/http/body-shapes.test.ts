import { describe, expect, it } from "vitest";
import { call, expectError, submit, submitOk, useApp, waitForStatus } from "../task-api.js";

describe("body shapes on POST /v1/images/tasks", () => {
  it("takes null optional fields as not given, as OpenAI does", async () => {
    const app = await useApp();
    const id = await submitOk(app, {
      prompt: "nullable fields",
      quality: null,
      style: null,
      user: null,
      size: null,
      n: null,
      response_format: null,
      background: null,
    });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status).toBe("completed");
    expect(done.body.data?.[0]?.b64_json).toBeTruthy(); // the default format
    const sent = app.upstream.requests.find((r) => r.path.endsWith("/images/generations"));
    expect(Object.values(sent?.body as object)).not.toContain(null);
  });

  it("answers invalid_json for no body at all", async () => {
    const app = await useApp();
    expectError(await call(app, "POST", "/v1/images/tasks"), 400, "invalid_json");
  });

  it.each(["null", '"a string"', "[1,2]", "42"])(
    "answers invalid_value for JSON that is not an object: %s",
    async (raw) => {
      const app = await useApp();
      expectError(await call(app, "POST", "/v1/images/tasks", { raw }), 400, "invalid_value");
      expectError(await call(app, "POST", "/v1/chat/completions", { raw }), 400, "invalid_value");
    },
  );

  it("still names a null required field as missing", async () => {
    const app = await useApp();
    expectError(await submit(app, { prompt: null }), 400, "missing_required_parameter", "prompt");
  });
});
