import { describe, expect, it } from "vitest";
import { TEST_KEYS } from "../../support/start-test-app.js";
import {
  call,
  cancelTask,
  expectError,
  getTask,
  submit,
  submitOk,
  useApp,
  waitForStatus,
} from "../task-api.js";

describe("POST /v1/images/tasks refuses bad input with its 4xx envelope", () => {
  it("malformed JSON -> 400 invalid_json", async () => {
    const app = await useApp();
    for (const raw of ['{"model": "gpt-image-1", "prompt": ', "not json at all", "{'a': 1}"]) {
      expectError(await call(app, "POST", "/v1/images/tasks", { raw }), 400, "invalid_json");
    }
  });

  it("a body that is not an object -> 400 invalid_value", async () => {
    const app = await useApp();
    for (const raw of ["[]", '["gpt-image-1"]', ""]) {
      const response = await call(app, "POST", "/v1/images/tasks", { raw });
      expect(response.status, raw).toBe(400);
      expect(["invalid_value", "invalid_json", "missing_required_parameter"]).toContain(
        response.body.error?.code,
      );
      expectError(response, 400, response.body.error!.code!);
    }
  });

  const invalid: Array<{
    name: string;
    body: Record<string, unknown>;
    code: string;
    param: string;
  }> = [
    { name: "missing prompt", body: {}, code: "missing_required_parameter", param: "prompt" },
    {
      name: "missing model",
      body: { prompt: "x", model: undefined },
      code: "missing_required_parameter",
      param: "model",
    },
    { name: "empty prompt", body: { prompt: "" }, code: "invalid_value", param: "prompt" },
    {
      name: "a 100 KB prompt",
      body: { prompt: "x".repeat(100 * 1024) },
      code: "invalid_value",
      param: "prompt",
    },
    { name: "a numeric prompt", body: { prompt: 42 }, code: "invalid_value", param: "prompt" },
    { name: "n: 0", body: { prompt: "x", n: 0 }, code: "invalid_value", param: "n" },
    { name: "n: 11", body: { prompt: "x", n: 11 }, code: "invalid_value", param: "n" },
    { name: 'n: "2"', body: { prompt: "x", n: "2" }, code: "invalid_value", param: "n" },
    { name: "n: 1.5", body: { prompt: "x", n: 1.5 }, code: "invalid_value", param: "n" },
    {
      name: 'size: "big"',
      body: { prompt: "x", size: "big" },
      code: "invalid_value",
      param: "size",
    },
    {
      name: 'response_format: "png"',
      body: { prompt: "x", response_format: "png" },
      code: "invalid_value",
      param: "response_format",
    },
    {
      name: "an unknown field",
      body: { prompt: "x", colour: "red" },
      code: "invalid_value",
      param: "colour",
    },
  ];
  it.each(invalid)("$name -> 400 $code", async ({ body, code, param }) => {
    const app = await useApp();
    const response = await submit(app, body);
    expectError(response, 400, code, param);
    expect(response.body.error!.message).toContain(param);
    expect(app.upstream.requests).toHaveLength(0);
  });

  it('model "dall-e-3" -> 400 unsupported_model', async () => {
    const app = await useApp();
    expectError(
      await submit(app, { model: "dall-e-3", prompt: "x" }, { key: TEST_KEYS.vip }),
      400,
      "unsupported_model",
      "model",
    );
  });

  it("a gpt-image model the key's group may not use, or no channel serves -> 404 model_not_found", async () => {
    const app = await useApp();
    const notAllowed = await submit(app, { prompt: "x" }, { key: TEST_KEYS.chat });
    const unknown = await submit(app, { model: "gpt-image-9", prompt: "x" });
    expectError(notAllowed, 404, "model_not_found", "model");
    expectError(unknown, 404, "model_not_found", "model");
    // One message shape for both, so a key cannot tell them apart.
    expect(notAllowed.body.error!.message.replace("gpt-image-1", "M")).toBe(
      unknown.body.error!.message.replace("gpt-image-9", "M"),
    );
  });

  it("a body over maxBodyBytes -> 413 request_too_large", async () => {
    const app = await useApp({
      config: { server: { port: 0, host: "127.0.0.1", maxBodyBytes: 4096 } },
    });
    expectError(await submit(app, { prompt: "x".repeat(8192) }), 413, "request_too_large");
    expect((await submit(app, { prompt: "fits" })).status).toBe(202);
  });

  it("accepts quality, style and user without error", async () => {
    const app = await useApp();
    for (const extra of [
      { quality: "standard" },
      { quality: "hd", style: "natural" },
      { quality: "whatever", style: "vivid", user: "end-user-1" },
      { size: "auto", n: 10 },
    ]) {
      const response = await submit(app, { prompt: "ok", ...extra });
      expect(response.status, JSON.stringify(extra)).toBe(202);
      const done = await waitForStatus(app, response.body.id, ["completed", "failed"]);
      expect(done.body.status, done.text).toBe("completed");
    }
  });

  it("needs a valid bearer key", async () => {
    const app = await useApp();
    expectError(await submit(app, { prompt: "x" }, { key: null }), 401, "missing_api_key");
    expectError(await submit(app, { prompt: "x" }, { key: "sk-wrong" }), 401, "invalid_api_key");
    const id = await submitOk(app, { prompt: "x" });
    expectError(await getTask(app, id, null), 401, "missing_api_key");
    expectError(await cancelTask(app, id, "sk-wrong"), 401, "invalid_api_key");
  });
});

describe("task ids: ownership and path tricks", () => {
  it("another key gets 404 task_not_found on GET and cancel, the owner still sees the task", async () => {
    const app = await useApp();
    const id = await submitOk(app, { prompt: "private" });
    await waitForStatus(app, id, ["completed"]);
    for (const key of [TEST_KEYS.other, TEST_KEYS.vip]) {
      expectError(await getTask(app, id, key), 404, "task_not_found", "task_id");
      expectError(await cancelTask(app, id, key), 404, "task_not_found", "task_id");
    }
    // Same answer as for an id that never existed: nothing tells the two apart.
    const unknown = await getTask(app, "task_AAAAAAAAAAAAAAAAAAAAAA", TEST_KEYS.other);
    expectError(unknown, 404, "task_not_found", "task_id");
    expect((await getTask(app, id)).body.status).toBe("completed");
  });

  const tricks: Array<{ name: string; id: string }> = [
    { name: "a well-formed unknown id", id: "task_AAAAAAAAAAAAAAAAAAAAAA" },
    { name: "task_ alone", id: "task_" },
    { name: "not an id", id: "nope" },
    { name: "encoded ../../etc/passwd", id: "%2e%2e%2f%2e%2e%2fetc%2fpasswd" },
    { name: "..%2F..%2Fetc%2Fpasswd", id: "..%2F..%2Fetc%2Fpasswd" },
    { name: "a NUL byte", id: "task_AAAAAAAAAAAAAAAAAAAAAA%00" },
    { name: "an id with an encoded /../..", id: "task_AAAAAAAAAAAAAAAAAAAAAA%2F..%2F.." },
    { name: "double encoding", id: "%252e%252e%252f" },
    { name: "an emoji", id: "task_%F0%9F%92%A5AAAAAAAAAAAAAAAAAAAA" },
    { name: "a 5000-character id", id: `task_${"A".repeat(5000)}` },
  ];
  it.each(tricks)("GET and cancel of $name -> 404 envelope", async ({ id }) => {
    const app = await useApp();
    for (const response of [
      await call(app, "GET", `/v1/images/tasks/${id}`),
      await call(app, "POST", `/v1/images/tasks/${id}/cancel`),
    ]) {
      expectError(response, 404, "task_not_found", "task_id");
    }
  });

  it.each(["%E0%A4%A", "%", "task_%ZZ"])(
    "a malformed escape (%s) -> a 4xx envelope, never a 500",
    async (id) => {
      const app = await useApp();
      for (const response of [
        await call(app, "GET", `/v1/images/tasks/${id}`),
        await call(app, "POST", `/v1/images/tasks/${id}/cancel`),
        await call(app, "GET", `/v1/images/files/${id}/0.png?expires=1&signature=x`, {
          key: null,
        }),
      ]) {
        expect(response.status, response.text).toBeGreaterThanOrEqual(400);
        expect(response.status, response.text).toBeLessThan(500);
        expectError(response, response.status, response.body.error?.code ?? "");
      }
    },
  );

  it("../ in the raw path does not escape the task routes", async () => {
    const app = await useApp();
    const response = await call(app, "GET", "/v1/images/tasks/../../etc/passwd");
    expectError(response, 404, "not_found");
  });
});
