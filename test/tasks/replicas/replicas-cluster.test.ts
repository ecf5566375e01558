import { describe, expect, it } from "vitest";
import {
  PNG_MAGIC,
  call,
  cancelTask,
  getTask,
  submit,
  submitOk,
  waitForStatus,
  waitUntil,
} from "../task-api.js";
import {
  useReplicaEnvironment,
  PNG_B64,
  upstream,
  clusterConfig,
  startReplicas,
  target,
} from "./replica-cluster.js";
// Replicas on one Redis (see replica-cluster.ts); the scenarios are split over files to run side by side.

useReplicaEnvironment();

describe("three replicas on one Redis", () => {
  it("hold the global limit and reach it, answer alike from every replica, keep idempotency and image URLs", async () => {
    upstream.reset();
    upstream.behave("images", { kind: "ok", delayMs: 700 });
    const replicas = (await startReplicas(await clusterConfig({ maxConcurrent: 2 }), 3)).map(
      target,
    );

    // Submitted round-robin; every replica sees each task right after submission.
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const id = await submitOk(replicas[i % 3]!, {
        prompt: `spread ${i}`,
        response_format: i === 0 ? "url" : "b64_json",
      });
      ids.push(id);
      for (const replica of replicas) expect((await getTask(replica, id)).status).toBe(200);
    }
    for (const id of ids) {
      const done = await waitForStatus(replicas[0]!, id, ["completed", "failed"], 20_000);
      expect(done.body.status, done.text).toBe("completed");
    }
    expect(upstream.maxInFlight).toBe(2);
    expect(upstream.maxInFlightPerPrompt).toBe(1);

    // Every replica answers every poll the same (a signed URL starts with the replica asked).
    const sameOrigin = (text: string) => text.replace(/http:\/\/127\.0\.0\.1:\d+/g, "ORIGIN");
    for (const id of ids) {
      const answers = await Promise.all(replicas.map((replica) => getTask(replica, id)));
      for (const answer of answers.slice(1)) {
        expect(sameOrigin(answer.text)).toBe(sameOrigin(answers[0]!.text));
      }
    }
    // The signed image URL works on every replica.
    const url = new URL((await getTask(replicas[1]!, ids[0]!)).body.data![0]!.url!);
    for (const replica of replicas) {
      const image = await fetch(`${replica.url}${url.pathname}${url.search}`);
      expect(image.status).toBe(200);
      expect(Buffer.from(await image.arrayBuffer()).subarray(0, 8)).toEqual(PNG_MAGIC);
    }

    // One Idempotency-Key sent to two replicas at the same moment makes one task.
    const headers = { "Idempotency-Key": "same-moment" };
    const both = await Promise.all(
      replicas.slice(0, 2).map((replica) => submit(replica, { prompt: "once" }, { headers })),
    );
    expect(both.map((answer) => answer.status)).toEqual([202, 202]);
    expect(both[0]!.body.id).toBe(both[1]!.body.id);
  });

  it("reach the replica running a task with a cancel sent to another, and show the cluster's queue", async () => {
    upstream.reset();
    upstream.behave("images", { kind: "hang" });
    const replicas = (await startReplicas(await clusterConfig({ maxConcurrent: 2 }), 3)).map(
      target,
    );
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await submitOk(replicas[i % 3]!, { prompt: `held ${i}` }));
    await waitUntil(() => upstream.inFlight === 2, "two generations upstream");

    // The queue gauges are the cluster's: the same on every replica.
    const gauges = await Promise.all(
      replicas.map(async (replica) => {
        const text = await (await fetch(`${replica.url}/metrics`)).text();
        return [
          /^image_task_sidecar_task_queue_depth (\S+)/m,
          /^image_task_sidecar_tasks_in_progress (\S+)/m,
        ]
          .map((pattern) => pattern.exec(text)?.[1])
          .join(",");
      }),
    );
    expect(gauges).toEqual(["2,2", "2,2", "2,2"]);

    // Cancel each running task through every replica in turn: its upstream call is aborted.
    const running: string[] = [];
    for (const id of ids) {
      if ((await getTask(replicas[0]!, id)).body.status === "in_progress") running.push(id);
    }
    expect(running).toHaveLength(2);
    for (const [index, id] of running.entries()) {
      const cancelled = await cancelTask(replicas[(index + 2) % 3]!, id);
      expect(cancelled.body).toMatchObject({ status: "failed", error: { code: "cancelled" } });
      await waitUntil(() => upstream.aborted >= index + 1, "the upstream call to be aborted");
    }
    // The waiting tasks take the freed slots.
    await waitUntil(
      () => upstream.inFlight === 2 && upstream.requests.length === 4,
      "the next two",
    );
  });
});

describe("waiting across replicas", () => {
  it("answers ?wait=N on one replica the moment the task finishes on another", async () => {
    upstream.reset();
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let answeredAt = 0;
    upstream.behave("images", {
      kind: "custom",
      async respond(_req, res) {
        await gate;
        answeredAt = performance.now();
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ created: 1, data: [{ b64_json: PNG_B64 }] }));
      },
    });
    const configFile = await clusterConfig({ maxConcurrent: 1 });
    // The task runs on the first replica: the second does not exist yet when it starts.
    const [runner] = await startReplicas(configFile, 1);
    const id = await submitOk(target(runner!), { prompt: "finish elsewhere" });
    await waitUntil(() => upstream.inFlight === 1, "the first replica to run the task");
    const [waiter] = await startReplicas(configFile, 1);

    const waiting = call(target(waiter!), "GET", `/v1/images/tasks/${id}?wait=20`);
    let answered = false;
    void waiting.then(() => (answered = true));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(answered).toBe(false);
    open();
    const answer = await waiting;
    const latency = performance.now() - answeredAt;
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.status).toBe("completed");
    // Heard over Redis pub/sub, not at the end of the 20 s: the wait has no poll tick, so
    // anything well under 20 s proves it. Between processes on a loaded CI machine the runner's
    // store writes and the publish have taken over 600 ms, hence the margin.
    expect(latency).toBeLessThan(5_000);

    // Prefer: wait on the other replica answers 200 once the task finishes anywhere.
    upstream.behave("images", { kind: "ok", delayMs: 200 });
    const preferred = await submit(
      target(waiter!),
      { prompt: "prefer across" },
      { headers: { Prefer: "wait=20" } },
    );
    expect(preferred.status, preferred.text).toBe(200);
    expect(preferred.headers.get("preference-applied")).toBe("wait=20");
  });
});
