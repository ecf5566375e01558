import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/start-test-app.js";

/*
 * Every answer says `X-Content-Type-Options: nosniff`, JSON ones included: a
 * browser never sniffs a type into an answer whose text a channel or a
 * client chose (an error message echoing a path, a passed-on body).
 */
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

describe("X-Content-Type-Options", () => {
  it("is nosniff on passthrough answers, errors, task views, health and the 404", async () => {
    const auth = { authorization: `Bearer ${app.key}` };
    const answers = {
      chat: await fetch(`${app.url}/v1/chat/completions`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
      }),
      models: await fetch(`${app.url}/v1/models`, { headers: auth }),
      noKey: await fetch(`${app.url}/v1/models`),
      unknownTask: await fetch(`${app.url}/v1/images/tasks/task_${"a".repeat(22)}`, {
        headers: auth,
      }),
      healthz: await fetch(`${app.url}/healthz`),
      notFound: await fetch(`${app.url}/<script>alert(1)</script>`),
    };
    const seen = Object.fromEntries(
      Object.entries(answers).map(([name, response]) => [
        name,
        [response.status, response.headers.get("x-content-type-options")],
      ]),
    );
    expect(seen).toEqual({
      chat: [200, "nosniff"],
      models: [200, "nosniff"],
      noKey: [401, "nosniff"],
      unknownTask: [404, "nosniff"],
      healthz: [200, "nosniff"],
      notFound: [404, "nosniff"],
    });
    expect(answers.notFound.headers.get("content-type")).toMatch(/^application\/json/);
  });
});
