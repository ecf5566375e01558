import { describe, expect, it, onTestFinished } from "vitest";
import { startTestApp } from "../support/start-test-app.js";
import { apiError, readEvents, retrieveUntil, sdk } from "./response-helpers.js";
import { scriptChannel } from "./scripted-channel.js";

describe("background: true with stream: true, and resuming with starting_after", () => {
  it("streams numbered events; a cut stream resumes after event N while it runs, and after it ended", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    const channel = scriptChannel(app.upstream, { hold: true });
    onTestFinished(() => channel.release());
    const client = sdk(app);

    const stream = await client.responses.create({
      model: "gpt-4o-mini",
      input: "stream me",
      background: true,
      stream: true,
    });
    // Cut right after the first text delta: the response goes on without its client.
    const head = await readEvents(stream, (event) => event.type === "response.output_text.delta");
    expect(head.map((event) => event.type)).toEqual([
      "response.created",
      "response.queued",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
    ]);
    expect(head.map((event) => event.sequence_number)).toEqual([0, 1, 2, 3, 4, 5]);
    const id = (head[0] as { response: { id: string } }).response.id;
    expect(head[0]).toMatchObject({ response: { status: "queued", background: true } });

    // Resume after event 3 while the channel still holds the rest.
    const resumed = await client.responses.retrieve(id, { stream: true, starting_after: 3 });
    setTimeout(() => channel.release(), 300);
    const rest = await readEvents(resumed);
    expect(rest.map((event) => event.sequence_number)).toEqual(
      Array.from({ length: rest.length }, (_, i) => 4 + i),
    );
    expect(rest.at(-1)).toMatchObject({
      type: "response.completed",
      response: { id, status: "completed", background: true },
    });
    const deltas = [...head.slice(0, 4), ...rest]
      .filter((event) => event.type === "response.output_text.delta")
      .map((event) => (event as { delta: string }).delta);
    expect(deltas.join("")).toBe("Hello from the scripted channel!");
    // The cut stream did not cut the channel's call.
    expect(channel.aborted).toBe(0);

    // Once it has ended, any point of it is still there.
    const whole = await readEvents(await client.responses.retrieve(id, { stream: true }));
    expect(whole.map((event) => event.sequence_number)).toEqual(
      Array.from({ length: 4 + rest.length }, (_, i) => i),
    );
    const last = rest.at(-1)!.sequence_number;
    const after = await readEvents(
      await client.responses.retrieve(id, { stream: true, starting_after: last - 1 }),
    );
    expect(after.map((event) => event.type)).toEqual(["response.completed"]);
    expect(
      await readEvents(await client.responses.retrieve(id, { stream: true, starting_after: last })),
    ).toEqual([]);
  });

  it("ends the stream of a failed response with response.failed, and refuses a bad starting_after", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    app.upstream.behave("responses", {
      kind: "status",
      status: 503,
      body: { error: { message: "Overloaded.", type: "server_error", code: "server_error" } },
    });
    const client = sdk(app);
    const events = await readEvents(
      await client.responses.create({
        model: "gpt-4o-mini",
        input: "fail",
        background: true,
        stream: true,
      }),
    );
    expect(events.map((event) => event.type)).toEqual([
      "response.created",
      "response.queued",
      "response.in_progress",
      "response.failed",
    ]);
    const id = (events[0] as { response: { id: string } }).response.id;
    expect(events.at(-1)).toMatchObject({
      sequence_number: 3,
      response: { id, status: "failed", error: { code: "server_error", message: "Overloaded." } },
    });
    expect((await retrieveUntil(client, id, ["failed"])).status).toBe("failed");
    const refused = await apiError(
      client.responses.retrieve(id, { stream: true, starting_after: -1 as number }),
    );
    expect(refused).toMatchObject({ status: 400, error: { param: "starting_after" } });
  });
});
