import { request } from "node:http";
import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { isValidHostHeader } from "../../src/http/public-base-url.js";
import { useApp, waitForStatus } from "../tasks/task-api.js";

// Location, signed image URLs and /mcp links are built from what the client says its host is:
// only a plain host[:port] may get in, and X-Forwarded-* only behind a trusted proxy.

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One request with headers fetch() will not send (Host), through node:http. */
function send(
  baseUrl: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: unknown,
  localAddress?: string,
): Promise<RawAnswer> {
  const url = new URL(baseUrl);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        ...(localAddress ? { localAddress } : {}),
        method,
        path,
        headers: {
          ...(payload ? { "content-type": "application/json" } : {}),
          ...headers,
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

const taskBody = { model: "gpt-image-1", prompt: "where am I", response_format: "url" };

function errorOf(answer: RawAnswer) {
  return (JSON.parse(answer.text) as { error: { code: string; param: string | null } }).error;
}

describe("isValidHostHeader", () => {
  it("accepts host[:port] and refuses anything a URL could read as more", () => {
    for (const good of [
      "example.com",
      "example.com:8443",
      "127.0.0.1:8080",
      "[::1]:8080",
      "[2001:db8::1]",
      "my_service:80",
      "EXAMPLE.com.",
    ]) {
      expect(isValidHostHeader(good), good).toBe(true);
    }
    for (const bad of [
      "",
      "a@evil.example",
      "user:pass@evil.example",
      "evil.example/path",
      "evil.example?x",
      "evil.example#x",
      "evil.example:99999",
      "evil.example:",
      "evil.example:abc",
      "[::1",
      "[not-ipv6]:80",
      "ev il.example",
      "evil.example\\x",
      "évil.example",
      "a".repeat(300),
    ]) {
      expect(isValidHostHeader(bad), bad).toBe(false);
    }
  });
});

describe("the service's own URLs without server.publicBaseUrl", () => {
  it("refuses a poisoned Host with 400 invalid_value instead of handing out its origin", async () => {
    const app = await useApp();
    const auth = { authorization: `Bearer ${app.key}` };
    for (const host of ["a@evil.example", "evil.example/x", "evil.example:99999", "[::1"]) {
      const answer = await send(app.url, "POST", "/v1/images/tasks", { ...auth, host }, taskBody);
      expect(answer.status, host).toBe(400);
      expect(errorOf(answer), host).toMatchObject({ code: "invalid_value", param: "Host" });
      expect(answer.headers.location, host).toBeUndefined();
      expect(answer.text).not.toContain("evil");
    }
  });

  it("builds Location and image URLs on a valid Host, ignoring X-Forwarded-* without trustProxy", async () => {
    const app = await useApp();
    const headers = {
      authorization: `Bearer ${app.key}`,
      host: "images.example:8443",
      "x-forwarded-host": "evil.example",
      "x-forwarded-proto": "https",
    };
    const submitted = await send(app.url, "POST", "/v1/images/tasks", headers, taskBody);
    expect(submitted.status, submitted.text).toBe(202);
    const id = (JSON.parse(submitted.text) as { id: string }).id;
    expect(submitted.headers.location).toBe(`http://images.example:8443/v1/images/tasks/${id}`);
    await waitForStatus(app, id, ["completed"]);
    const task = await send(app.url, "GET", `/v1/images/tasks/${id}`, headers);
    const url = (JSON.parse(task.text) as { data: Array<{ url: string }> }).data[0]!.url;
    expect(new URL(url).origin).toBe("http://images.example:8443");
    const poisoned = await send(app.url, "GET", `/v1/images/tasks/${id}`, {
      ...headers,
      host: "a@evil.example",
    });
    expect(poisoned.status).toBe(400);
  });

  it("refuses a task submission with two Host headers", async () => {
    const app = await useApp();
    const { hostname, port } = new URL(app.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () =>
        socket.end(
          `POST /v1/images/tasks HTTP/1.1\r\n` +
            `Host: good.example\r\nHost: evil.example\r\nAuthorization: Bearer ${app.key}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${JSON.stringify(taskBody).length}\r\n` +
            `Connection: close\r\n\r\n${JSON.stringify(taskBody)}`,
        ),
      );
      let text = "";
      socket.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
      socket.on("close", () => resolve(text));
      socket.on("error", reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
  });
});

describe("server.trustProxy", () => {
  it("uses the first X-Forwarded-Host and -Proto behind a trusted proxy", async () => {
    const app = await useApp({
      config: { server: { port: 0, host: "127.0.0.1", trustProxy: true } },
    });
    const submitted = await send(
      app.url,
      "POST",
      "/v1/images/tasks",
      {
        authorization: `Bearer ${app.key}`,
        host: "internal:8080",
        "x-forwarded-host": "images.example.com, proxy.internal",
        "x-forwarded-proto": "https",
      },
      taskBody,
    );
    expect(submitted.status, submitted.text).toBe(202);
    const id = (JSON.parse(submitted.text) as { id: string }).id;
    expect(submitted.headers.location).toBe(`https://images.example.com/v1/images/tasks/${id}`);
  });

  it("ignores X-Forwarded-Host and -Proto from a peer trustProxy does not name", async () => {
    // Linux routes all of 127/8 to the loopback: 127.0.0.2 is the proxy, 127.0.0.3 is not.
    const app = await useApp({
      config: { server: { port: 0, host: "127.0.0.1", trustProxy: ["127.0.0.2"] } },
    });
    const headers = {
      authorization: `Bearer ${app.key}`,
      host: "internal:8080",
      "x-forwarded-host": "images.example.com",
      "x-forwarded-proto": "https",
    };
    const location = async (from: string) => {
      const submitted = await send(app.url, "POST", "/v1/images/tasks", headers, taskBody, from);
      expect(submitted.status, submitted.text).toBe(202);
      return String(submitted.headers.location);
    };
    expect(await location("127.0.0.3")).toMatch(/^http:\/\/internal:8080\/v1\/images\/tasks\//);
    expect(await location("127.0.0.2")).toMatch(
      /^https:\/\/images\.example\.com\/v1\/images\/tasks\//,
    );
  });

  it("refuses a poisoned X-Forwarded-Host or an odd X-Forwarded-Proto", async () => {
    const app = await useApp({
      config: { server: { port: 0, host: "127.0.0.1", trustProxy: true } },
    });
    const auth = { authorization: `Bearer ${app.key}` };
    const badHost = await send(
      app.url,
      "POST",
      "/v1/images/tasks",
      { ...auth, "x-forwarded-host": "a@evil.example" },
      taskBody,
    );
    expect(badHost.status).toBe(400);
    expect(errorOf(badHost)).toMatchObject({ code: "invalid_value", param: "X-Forwarded-Host" });
    const badProto = await send(
      app.url,
      "POST",
      "/v1/images/tasks",
      { ...auth, "x-forwarded-proto": "javascript" },
      taskBody,
    );
    expect(badProto.status).toBe(400);
    expect(errorOf(badProto)).toMatchObject({ param: "X-Forwarded-Proto" });
  });
});

describe("server.publicBaseUrl", () => {
  it("wins over Host and X-Forwarded-*, whatever they say", async () => {
    const app = await useApp({
      config: {
        server: {
          port: 0,
          host: "127.0.0.1",
          trustProxy: true,
          publicBaseUrl: "https://images.example.com",
        },
      },
    });
    const submitted = await send(
      app.url,
      "POST",
      "/v1/images/tasks",
      { authorization: `Bearer ${app.key}`, host: "a@evil.example", "x-forwarded-host": "x.evil" },
      taskBody,
    );
    expect(submitted.status, submitted.text).toBe(202);
    expect(submitted.headers.location).toMatch(
      /^https:\/\/images\.example\.com\/v1\/images\/tasks\//,
    );
  });
});

describe("/mcp links", () => {
  /** A tools/call the stateless endpoint answers without a session. */
  function checkTask(taskId: string) {
    return {
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "check_image_task", arguments: { task_id: taskId, wait_seconds: 0 } },
    };
  }
  const mcpHeaders = { accept: "application/json, text/event-stream" };

  it("are built on the validated Host, and a poisoned Host is refused", async () => {
    const app = await useApp();
    const auth = { authorization: `Bearer ${app.key}` };
    const submitted = await send(
      app.url,
      "POST",
      "/v1/images/tasks",
      { ...auth, host: "127.0.0.1" },
      taskBody,
    );
    const id = (JSON.parse(submitted.text) as { id: string }).id;
    await waitForStatus(app, id, ["completed"]);

    const good = await send(
      app.url,
      "POST",
      "/mcp",
      { ...auth, ...mcpHeaders, host: "mcp.example:9443" },
      checkTask(id),
    );
    expect(good.status, good.text).toBe(200);
    expect(good.text).toContain(`http://mcp.example:9443/v1/images/files/${id}/0.png`);

    const poisoned = await send(
      app.url,
      "POST",
      "/mcp",
      { ...auth, ...mcpHeaders, host: "a@evil.example" },
      checkTask(id),
    );
    expect(poisoned.status).toBe(400);
    expect(errorOf(poisoned)).toMatchObject({ code: "invalid_value", param: "Host" });
  });
});
