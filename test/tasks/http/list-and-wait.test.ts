import type { ServerResponse } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { CursorPage } from "openai/pagination";
import { describe, expect, it } from "vitest";
import { encodePng } from "../../../src/demo/png-encoder.js";
import type { FakeUpstream } from "../../support/fake-upstream.js";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { STORES } from "../store-places.js";
import {
  call,
  expectError,
  getTask,
  submit,
  submitOk,
  useApp,
  waitForStatus,
  waitUntil,
  type ApiResponse,
  type TaskJson,
} from "../task-api.js";

/** What `GET /v1/images/tasks` answers. */
interface TaskList {
  object: string;
  data: TaskJson[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

const PNG_B64 = encodePng({
  width: 2,
  height: 2,
  channels: 3,
  pixels: Uint8Array.from({ length: 12 }, (_, i) => i * 20),
}).toString("base64");

/**
 * The channel holds every generation until the test opens the gate, and
 * notes when it answered: the moment the task can finish.
 */
function gatedUpstream(upstream: FakeUpstream) {
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const state = { answeredAt: 0 };
  upstream.behave("images", {
    kind: "custom",
    async respond(_req, res: ServerResponse) {
      await gate;
      state.answeredAt = performance.now();
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ created: 1, data: [{ b64_json: PNG_B64 }] }));
    },
  });
  return {
    open: () => open(),
    get answeredAt() {
      return state.answeredAt;
    },
  };
}

/** Starts a request and notes when its answer came. */
function timed(request: Promise<ApiResponse>) {
  const state: { at?: number } = {};
  const answer = request.then((response) => {
    state.at = performance.now();
    return response;
  });
  return {
    answer,
    get answeredAt() {
      return state.at;
    },
  };
}

const list = async (target: { url: string; key: string }, query = "", key?: string) => {
  const response = await call(target, "GET", `/v1/images/tasks${query}`, { key });
  return { ...response, list: JSON.parse(response.text) as TaskList };
};

describe.each(STORES)("the task list and waiting on $name", ({ options }) => {
  it("pages each key's own tasks newest first, filtered by status, without b64_json", async () => {
    const app = await useApp({ ...(await options()), imageTasks: { maxConcurrent: 1 } });
    const other = { url: app.url, key: TEST_KEYS.other };
    const mine: string[] = [];
    const theirs: string[] = [];
    for (let i = 0; i < 5; i++) {
      mine.push(
        await submitOk(app, { prompt: `mine ${i}`, response_format: i ? "b64_json" : "url" }),
      );
      if (i < 2) theirs.push(await submitOk(other, { prompt: `theirs ${i}` }));
    }
    for (const id of [...mine, ...theirs]) {
      await waitForStatus(app, id, ["completed"], 10_000, mine.includes(id) ? app.key : other.key);
    }
    const newest = [...mine].reverse();

    const first = await list(app, "?limit=2");
    expect(first.status, first.text).toBe(200);
    expect(first.headers.get("cache-control")).toBe("no-store");
    expect(first.list).toMatchObject({
      object: "list",
      first_id: newest[0],
      last_id: newest[1],
      has_more: true,
    });
    expect(first.list.data.map((task) => task.id)).toEqual(newest.slice(0, 2));
    const second = await list(app, `?limit=2&after=${first.list.last_id}`);
    expect(second.list.data.map((task) => task.id)).toEqual(newest.slice(2, 4));
    expect(second.list.has_more).toBe(true);
    const last = await list(app, `?limit=2&after=${second.list.last_id}`);
    expect(last.list.data.map((task) => task.id)).toEqual(newest.slice(4));
    expect(last.list).toMatchObject({ has_more: false, first_id: mine[0], last_id: mine[0] });

    // The default page holds them all; the other key sees only its own.
    expect((await list(app)).list.data.map((task) => task.id)).toEqual(newest);
    expect((await list(other)).list.data.map((task) => task.id)).toEqual([...theirs].reverse());
    const otherKeysTask = await list(app, `?after=${theirs[0]}`);
    expectError(otherKeysTask, 400, "invalid_value", "after");

    // order=asc pages oldest first, first_id and last_id in that order; desc is the default.
    const oldest = [...newest].reverse();
    const up = await list(app, "?limit=3&order=asc");
    expect(up.list.data.map((task) => task.id)).toEqual(oldest.slice(0, 3));
    expect(up.list).toMatchObject({ first_id: oldest[0], last_id: oldest[2], has_more: true });
    const upNext = await list(app, `?limit=3&order=asc&after=${up.list.last_id}`);
    expect(upNext.list.data.map((task) => task.id)).toEqual(oldest.slice(3));
    expect(upNext.list.has_more).toBe(false);
    expect((await list(app, "?order=desc")).list.data.map((task) => task.id)).toEqual(newest);

    // Items are the task as GET shows it, without b64_json (a signed thumbnail link instead); a
    // url item stays.
    const items = (await list(app)).list.data;
    const urlTask = items.find((task) => task.id === mine[0])!;
    expect(urlTask).toMatchObject({ object: "image.task", status: "completed" });
    expect(urlTask.data![0]!.url).toMatch(/\/v1\/images\/files\/task_/);
    const b64Task = items.find((task) => task.id === mine[1])!;
    expect(b64Task.data).toEqual([
      {
        thumbnail_url: expect.stringMatching(new RegExp(`/v1/images/files/${mine[1]}/0\\.png\\?`)),
      },
    ]);
    expect(JSON.stringify(items)).not.toContain('"b64_json":');
    const polled = await getTask(app, mine[1]!);
    expect(polled.body.data![0]!.b64_json).toMatch(/^iVBORw0KGgo/);
    expect({ ...b64Task, data: undefined }).toEqual({ ...polled.body, data: undefined });

    // By status, as a cancelled task moves to failed.
    app.upstream.behave("images", { kind: "hang" });
    const running = await submitOk(app, { prompt: "running" });
    const queued = await submitOk(app, { prompt: "queued" });
    await waitForStatus(app, running, ["in_progress"]);
    const ids = async (query: string) => (await list(app, query)).list.data.map((t) => t.id);
    expect(await ids("?status=in_progress")).toEqual([running]);
    expect(await ids("?status=queued")).toEqual([queued]);
    expect(await ids("?status=completed&limit=100")).toEqual(newest);
    expect(await ids("?status=failed")).toEqual([]);
    await call(app, "POST", `/v1/images/tasks/${queued}/cancel`);
    expect(await ids("?status=failed")).toEqual([queued]);
    expect(await ids("?status=queued")).toEqual([]);
    expect(await ids(`?status=completed&limit=1&after=${running}`)).toEqual([newest[0]]);
  });

  it("answers ?wait=N the moment the task finishes, and a finished task at once", async () => {
    const app = await useApp(await options());
    const gate = gatedUpstream(app.upstream);
    const id = await submitOk(app, { prompt: "wait for me" });
    await waitUntil(() => app.upstream.inFlight === 1, "the generation to start");

    const sent = performance.now();
    const waiting = timed(call(app, "GET", `/v1/images/tasks/${id}?wait=20`));
    await sleep(400);
    expect(waiting.answeredAt).toBeUndefined(); // still waiting
    gate.open();
    const answer = await waiting.answer;
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.status).toBe("completed");
    expect(answer.body.data![0]!.b64_json).toBe(PNG_B64);
    expect(answer.headers.get("retry-after")).toBeNull();
    // Woken by the task's end (a few ms on a quiet machine), not at the end of the 20 s.
    const latency = waiting.answeredAt! - gate.answeredAt;
    expect(latency).toBeLessThan(2_000);
    expect(waiting.answeredAt! - sent).toBeGreaterThanOrEqual(400);
    // The wait answers with the task as its finish event carried it: what a read shows.
    expect(answer.body).toEqual((await getTask(app, id)).body);

    const again = performance.now();
    const finished = await call(app, "GET", `/v1/images/tasks/${id}?wait=30`);
    expect(finished.body.status).toBe("completed");
    // At once, not at the end of the 30 s (with room for a loaded CI machine).
    expect(performance.now() - again).toBeLessThan(10_000);
  });

  it("answers Prefer: wait=N with 200 and the result when done in time, else the usual 202, one task either way", async () => {
    const app = await useApp(await options());
    app.upstream.behave("images", { kind: "ok", delayMs: 150 });
    const done = await submit(
      app,
      { prompt: "quick", response_format: "url" },
      { headers: { Prefer: "respond-async, wait=10" } },
    );
    expect(done.status, done.text).toBe(200);
    expect(done.headers.get("preference-applied")).toBe("wait=10");
    expect(done.headers.get("location")).toBe(`${app.url}/v1/images/tasks/${done.body.id}`);
    expect(done.body.status).toBe("completed");
    expect(done.body.data![0]!.url).toMatch(/\/v1\/images\/files\//);

    app.upstream.reset();
    app.upstream.behave("images", { kind: "hang" });
    const started = performance.now();
    const pending = await submit(app, { prompt: "slow" }, { headers: { Prefer: "wait=1" } });
    expect(pending.status, pending.text).toBe(202);
    expect(performance.now() - started).toBeGreaterThanOrEqual(900);
    expect(pending.headers.get("preference-applied")).toBeNull();
    expect(pending.headers.get("retry-after")).toBe("1");
    expect(["queued", "in_progress"]).toContain(pending.body.status);
    // Created once: one task in the list, one call upstream.
    const tasks = (await list(app, "?limit=100")).list.data;
    expect(tasks.map((task) => task.id)).toEqual([pending.body.id, done.body.id]);
    await waitUntil(() => app.upstream.requests.length === 1, "the one upstream call");
    await sleep(100);
    expect(app.upstream.requests).toHaveLength(1);
  });
});

describe("list and wait: bad input, limits, shutdown (memory)", () => {
  it("refuses bad query values with 400 invalid_value naming the parameter", async () => {
    const app = await useApp();
    const id = await submitOk(app, { prompt: "x" });
    for (const [query, param] of [
      ["?limit=0", "limit"],
      ["?limit=101", "limit"],
      ["?limit=abc", "limit"],
      ["?limit=1&limit=2", "limit"],
      ["?after=nope", "after"],
      ["?after=task_AAAAAAAAAAAAAAAAAAAAAA", "after"],
      ["?status=done", "status"],
      ["?order=oldest", "order"],
      ["?order=ASC", "order"],
      ["?order=asc&order=desc", "order"],
    ] as const) {
      expectError(await list(app, query), 400, "invalid_value", param);
    }
    for (const wait of ["61", "-1", "abc", "1e3", "10&wait=2"]) {
      expectError(
        await call(app, "GET", `/v1/images/tasks/${id}?wait=${wait}`),
        400,
        "invalid_value",
        "wait",
      );
    }
    // A parameter the list does not know is ignored, as OpenAI's list routes do.
    expect((await list(app, "?limit=100&include=everything")).status).toBe(200);
    expectError(await list(app, "", "sk-nope"), 401, "invalid_api_key");
  });

  it("answers waiting requests at once with the task as it is when the service stops", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "hang" });
    const id = await submitOk(app, { prompt: "never ends" });
    await waitForStatus(app, id, ["in_progress"]);
    const waiting = call(app, "GET", `/v1/images/tasks/${id}?wait=60`);
    await sleep(200);
    const stopping = performance.now();
    const closed = app.close();
    const answer = await waiting;
    expect(performance.now() - stopping).toBeLessThan(5000);
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.status).toBe("in_progress");
    await closed;
  });

  it("works through the openai SDK's generic calls", async () => {
    const app = await useApp();
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL });
    const task = await client.post<TaskJson>("/images/tasks", {
      body: { model: "gpt-image-1", prompt: "sdk" },
      headers: { Prefer: "wait=10" },
    });
    expect(task.status).toBe("completed");
    const waited = await client.get<TaskJson>(`/images/tasks/${task.id}`, { query: { wait: 5 } });
    expect(waited.status).toBe("completed");
    const page = await client.get<TaskList>("/images/tasks", { query: { limit: 1 } });
    expect(page.data.map((item) => item.id)).toEqual([task.id]);
  });

  it("pages through the openai SDK's cursor pages, newest first or with order asc", async () => {
    const app = await useApp();
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await submitOk(app, { prompt: `page ${i}` }));
    // The SDK's own paging: `after` the last item while `has_more`, two tasks a request.
    const all = async (query: Record<string, unknown>) => {
      const seen: string[] = [];
      const pages = client.getAPIList<TaskJson, CursorPage<TaskJson>>("/images/tasks", CursorPage, {
        query,
      });
      for await (const task of pages) seen.push(task.id);
      return seen;
    };
    expect(await all({ limit: 2 })).toEqual([...ids].reverse());
    expect(await all({ limit: 2, order: "asc" })).toEqual(ids);
  });
});
