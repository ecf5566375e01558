import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { STORES } from "../store-places.js";
import {
  call,
  expectError,
  getTask,
  submitOk,
  useApp,
  waitForStatus,
  type Target,
} from "../task-api.js";

/*
 * A finished task's answer no longer changes, so a poll sends the one made
 * for the poll before: these check that what is sent again is what would be
 * made anew (bytes and headers), for the origin and the `?links` it was made
 * for only, and never for a task that is deleted or that the caller does not
 * own.
 */

/** A poll as a client behind another name reaches the service: its Host. */
function pollAs(
  target: Target,
  path: string,
  host: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const sent = request(
      `${target.url}${path}`,
      { headers: { host, authorization: `Bearer ${target.key}` } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
        );
        res.on("error", reject);
      },
    );
    sent.on("error", reject);
    sent.end();
  });
}

describe.each(STORES)("polls of a finished task on the $name store", ({ options }) => {
  it("sends the same answer again, headers included, and 404 once the task is deleted", async () => {
    const app = await useApp(await options());
    const id = await submitOk(app, { prompt: "a fox", response_format: "b64_json" });
    const first = await waitForStatus(app, id, ["completed"]);
    expect(first.body.data![0]!.b64_json).toEqual(expect.any(String));
    const again = await getTask(app, id);
    const third = await getTask(app, id);
    for (const poll of [again, third]) {
      expect(poll.status).toBe(200);
      expect(poll.text).toBe(first.text);
      expect(poll.headers.get("content-length")).toBe(String(Buffer.byteLength(first.text)));
      expect(poll.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(poll.headers.get("cache-control")).toBe("no-store");
      expect(poll.headers.get("retry-after")).toBeNull();
    }
    const head = await call(app, "HEAD", `/v1/images/tasks/${id}`);
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe(String(Buffer.byteLength(first.text)));

    expectError(await getTask(app, id, TEST_KEYS.other), 404, "task_not_found", "task_id");
    expect((await call(app, "DELETE", `/v1/images/tasks/${id}`)).status).toBe(200);
    expectError(await getTask(app, id), 404, "task_not_found", "task_id");
  });

  it("makes a url task's answer for each origin and each ?links it is polled with", async () => {
    const app = await useApp(await options());
    const id = await submitOk(app, { prompt: "a fox", response_format: "url" });
    await waitForStatus(app, id, ["completed"]);
    const path = `/v1/images/tasks/${id}`;
    const urlOf = (body: string) =>
      (JSON.parse(body) as { data: Array<{ url: string }> }).data[0]!.url;
    for (let round = 0; round < 2; round += 1) {
      const a = await pollAs(app, path, "a.example:8080");
      const b = await pollAs(app, path, "b.example");
      const service = await pollAs(app, `${path}?links=service`, "a.example:8080");
      expect([a.status, b.status, service.status]).toEqual([200, 200, 200]);
      expect(urlOf(a.body)).toMatch(/^http:\/\/a\.example:8080\//);
      expect(urlOf(b.body)).toMatch(/^http:\/\/b\.example\//);
      expect(urlOf(service.body)).toMatch(/^http:\/\/a\.example:8080\//);
      expect(urlOf(a.body).slice("http://a.example:8080".length)).toBe(
        urlOf(b.body).slice("http://b.example".length),
      );
    }
  });
});
