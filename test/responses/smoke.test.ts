import OpenAI from "openai";
import { describe, expect, it, onTestFinished } from "vitest";
import { startTestApp } from "../support/start-test-app.js";
import { scriptChannel } from "./scripted-channel.js";

describe("smoke", () => {
  it("creates and retrieves", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    scriptChannel(app.upstream);
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL });
    const created = await client.responses.create({
      model: "gpt-4o-mini",
      input: "hi",
      background: true,
    });
    console.log(created);
    for (let i = 0; i < 50; i++) {
      const got = await client.responses.retrieve(created.id);
      if (got.status === "completed") {
        console.log(JSON.stringify(got), got.output_text);
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    console.log(app.upstream.requests.map((r) => r.body));
    expect(1).toBe(1);
  });
});
