import { describe, expect, it, onTestFinished } from "vitest";
import { startDemoService } from "../demo/demo-service.js";

describe("smoke demo", () => {
  it("image tool in background, streamed", async () => {
    const demo = await startDemoService();
    onTestFinished(() => demo.server.close(100));
    const stream = await demo.client.responses.create({
      model: "gpt-4o-mini",
      input: "a red fox",
      background: true,
      stream: true,
      tools: [{ type: "image_generation", partial_images: 2, size: "64x64" }],
    });
    let id = "";
    for await (const event of stream) {
      const shown = JSON.stringify(event).replace(/"[A-Za-z0-9+/=]{200,}"/g, '"<b64>"');
      console.log(shown.slice(0, 300));
      if (event.type === "response.created") id = event.response.id;
    }
    const got = await demo.client.responses.retrieve(id);
    console.log(JSON.stringify(got).replace(/"[A-Za-z0-9+/=]{200,}"/g, '"<b64>"'));
    expect(got.status).toBe("completed");
  });
});
