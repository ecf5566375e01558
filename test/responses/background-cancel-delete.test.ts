import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { startTestApp } from "../support/start-test-app.js";
import { apiError, retrieveUntil, sdk, until } from "./response-helpers.js";
import { scriptChannel } from "./scripted-channel.js";

describe("cancel and delete of a background response", () => {
  it("cancels a running response: the channel's call is aborted and the response is cancelled", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    const channel = scriptChannel(app.upstream, { hold: true });
    onTestFinished(() => channel.release());
    const client = sdk(app);
    const started = channel.nextStarted();
    const { id } = await client.responses.create({
      model: "gpt-4o-mini",
      input: "a long answer",
      background: true,
    });
    await started;
    expect((await client.responses.retrieve(id)).status).toBe("in_progress");

    const cancelled = await client.responses.cancel(id);
    expect(cancelled).toMatchObject({
      id,
      object: "response",
      status: "cancelled",
      background: true,
    });
    await until(() => channel.aborted === 1, "the channel's call aborted");
    expect((await client.responses.retrieve(id)).status).toBe("cancelled");
    // A second cancel answers the response as it is.
    expect((await client.responses.cancel(id)).status).toBe("cancelled");
  });

  it("answers a cancel of a finished response with the response as it is", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    scriptChannel(app.upstream);
    const client = sdk(app);
    const { id } = await client.responses.create({
      model: "gpt-4o-mini",
      input: "quick",
      background: true,
    });
    await retrieveUntil(client, id, ["completed"]);
    const answer = await client.responses.cancel(id);
    expect(answer.status).toBe("completed");
    expect(answer.output).toMatchObject([
      { type: "message", content: [{ text: "Hello from the scripted channel!" }] },
    ]);
  });

  it("deletes a response (a running one is cancelled first): OpenAI's answer, then 404", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    const channel = scriptChannel(app.upstream, { hold: true });
    onTestFinished(() => channel.release());
    const client = sdk(app);

    const started = channel.nextStarted();
    const running = await client.responses.create({
      model: "gpt-4o-mini",
      input: "delete me while running",
      background: true,
    });
    await started;
    const deleted = await fetch(`${app.baseURL}/responses/${running.id}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${app.key}` },
    });
    expect(deleted.status).toBe(200);
    expect(await deleted.json()).toEqual({ id: running.id, object: "response", deleted: true });
    await until(() => channel.aborted === 1, "the channel's call aborted");
    for (const again of [
      () => client.responses.retrieve(running.id),
      () => client.responses.delete(running.id),
      () => client.responses.cancel(running.id),
    ]) {
      expect(await apiError(again())).toMatchObject({
        status: 404,
        error: { code: "response_not_found" },
      });
    }

    channel.release();
    const finished = await client.responses.create({
      model: "gpt-4o-mini",
      input: "delete me when done",
      background: true,
    });
    await retrieveUntil(client, finished.id, ["completed"]);
    await client.responses.delete(finished.id);
    expect(await apiError(client.responses.retrieve(finished.id))).toMatchObject({ status: 404 });
  });

  it("deletes on the SQLite store too, and a restart on the file does not bring it back", async () => {
    const dir = await mkdtemp(join(tmpdir(), "responses-sqlite-"));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const storeUrl = `sqlite://${join(dir, "tasks.db")}`;
    const app = await startTestApp({ storeUrl });
    scriptChannel(app.upstream);
    const client = sdk(app);
    const kept = await client.responses.create({
      model: "gpt-4o-mini",
      input: "keep",
      background: true,
    });
    const gone = await client.responses.create({
      model: "gpt-4o-mini",
      input: "drop",
      background: true,
    });
    await retrieveUntil(client, kept.id, ["completed"]);
    await retrieveUntil(client, gone.id, ["completed"]);
    await client.responses.delete(gone.id);
    await app.close();

    const again = await startTestApp({ storeUrl });
    onTestFinished(() => again.close());
    const reopened = sdk(again);
    expect((await reopened.responses.retrieve(kept.id)).output_text).toBe(
      "Hello from the scripted channel!",
    );
    expect(await apiError(reopened.responses.retrieve(gone.id))).toMatchObject({ status: 404 });
  });
});
