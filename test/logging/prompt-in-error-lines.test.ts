import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { PROMPT_MASK, maskPrompt, maskPrompts } from "../../src/logging/mask-prompt.js";
import { retrieveUntil, sdk } from "../responses/response-helpers.js";
import { startTestApp } from "../support/start-test-app.js";
import { getTask, submitOk, useApp, waitForStatus } from "../tasks/task-api.js";

/*
 * Prompts stay out of logs, also when a channel echoes them: a fake channel
 * that refuses every image request with `400 Invalid prompt: <the prompt>`
 * (whole, or cut as channels cut long ones). The task's owner still reads
 * the channel's message; the `task.failed` line has the prompt masked.
 */

type Line = Record<string, unknown>;

async function echoingApp() {
  const lines: Line[] = [];
  const logger = pino(
    { level: "debug" },
    { write: (line: string) => void lines.push(JSON.parse(line)) },
  );
  const app = await useApp({ logger });
  app.upstream.behave("images", {
    kind: "custom",
    respond: (_req, res, body) => {
      const prompt = String((body as { prompt?: unknown }).prompt);
      // A long prompt is cut, as channels do in their messages.
      const shown = prompt.length > 120 ? `${prompt.slice(0, 100)}...` : prompt;
      res.writeHead(400, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          error: {
            message: `Invalid prompt: ${shown}`,
            type: "invalid_request_error",
            code: "invalid_prompt",
          },
        }),
      );
    },
  });
  return { app, lines };
}

describe("a channel's error message that repeats the prompt", () => {
  it("reaches the task's owner as it is, and the task.failed line with the prompt masked", async () => {
    const { app, lines } = await echoingApp();
    const prompt = "a castle of spun sugar where the night guard keeps a secret";
    const id = await submitOk(app, { prompt });
    const failed = await waitForStatus(app, id, ["failed"]);
    expect(failed.body.error).toMatchObject({
      code: "invalid_prompt",
      message: `Invalid prompt: ${prompt}`,
    });
    const line = lines.find(
      (candidate) => candidate.msg === "task.failed" && candidate.task_id === id,
    );
    expect(line).toMatchObject({
      error_code: "invalid_prompt",
      error_message: `Invalid prompt: ${PROMPT_MASK}`,
    });
    expect(JSON.stringify(lines)).not.toContain("spun sugar");
    expect((await getTask(app, id)).text).toContain(prompt);
  });

  it("masks what a channel kept of a long prompt it cut", async () => {
    const { app, lines } = await echoingApp();
    const prompt = `a long prompt that names a private project, ${"and goes on about it ".repeat(12)}`;
    const id = await submitOk(app, { prompt });
    await waitForStatus(app, id, ["failed"]);
    const line = lines.find(
      (candidate) => candidate.msg === "task.failed" && candidate.task_id === id,
    );
    expect(line?.error_message).toBe(`Invalid prompt: ${PROMPT_MASK}...`);
    expect(JSON.stringify(lines)).not.toContain("private project");
  });
});

describe("a channel's error message that repeats a background response's input", () => {
  it("reaches the response's owner as it is, and the task.failed line with the input masked", async () => {
    const lines: Line[] = [];
    const logger = pino(
      { level: "info" },
      { write: (line: string) => void lines.push(JSON.parse(line)) },
    );
    const app = await startTestApp({ logger });
    onTestFinished(() => app.close());
    app.upstream.behave("responses", {
      kind: "custom",
      respond: (_req, res, body) => {
        const input = (body as { input?: Array<{ content?: Array<{ text?: string }> }> }).input;
        const text = input?.[0]?.content?.[0]?.text ?? "";
        res.writeHead(400, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            error: { message: `Invalid input: ${text}`, type: "invalid_request_error" },
          }),
        );
      },
    });
    const secret = "the launch date of the unannounced product is the ninth";
    const { id } = await sdk(app).responses.create({
      model: "gpt-4o-mini",
      input: [{ role: "user", content: [{ type: "input_text", text: secret }] }],
      background: true,
    });
    const failed = await retrieveUntil(sdk(app), id, ["failed", "completed"]);
    expect(failed.error?.message).toBe(`Invalid input: ${secret}`);
    const line = lines.find(
      (candidate) => candidate.msg === "task.failed" && candidate.task_id === id,
    );
    expect(line?.error_message).toBe(`Invalid input: ${PROMPT_MASK}`);
    expect(JSON.stringify(lines)).not.toContain("unannounced product");
  });
});

describe("maskPrompt", () => {
  it("masks every repetition, or the longest start a message kept, and nothing else", () => {
    expect(maskPrompt("bad: a red fox; again a red fox", "a red fox")).toBe(
      `bad: ${PROMPT_MASK}; again ${PROMPT_MASK}`,
    );
    expect(
      maskPrompt("refused: a red fox jumping over t", "a red fox jumping over the lazy dog"),
    ).toBe(`refused: ${PROMPT_MASK}`);
    // Short prompts and short shared starts are left alone: they would mask ordinary words.
    expect(maskPrompt("the cat is not allowed", "cat")).toBe("the cat is not allowed");
    expect(maskPrompt("a red fox was seen", "a red fox jumping over the lazy dog")).toBe(
      "a red fox was seen",
    );
    expect(maskPrompt(undefined, "a red fox")).toBeUndefined();
    expect(maskPrompt("Invalid: 42", 42)).toBe("Invalid: 42");
  });

  it("masks each text of a Responses body: instructions, a string input, input items' parts", () => {
    const request = {
      instructions: "answer as a pirate would",
      input: [
        { role: "user", content: "tell me about the harbour" },
        { role: "user", content: [{ type: "input_text", text: "and the lighthouse keeper" }] },
      ],
    };
    expect(
      maskPrompts(
        "no: answer as a pirate would / tell me about the harbour / and the lighthouse keeper",
        request,
      ),
    ).toBe(`no: ${PROMPT_MASK} / ${PROMPT_MASK} / ${PROMPT_MASK}`);
    expect(maskPrompts("bad: a string input here", { input: "a string input here" })).toBe(
      `bad: ${PROMPT_MASK}`,
    );
  });
});
