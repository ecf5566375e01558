import type { IncomingMessage } from "node:http";

/* The random channel's calls told apart: their route, their task, their body. */

/** The route a call takes at the channel (`generate`, `submit:sub2api`, `poll:bifrost`, ...). */
export function routeOf(method: string, path: string): string {
  // Bifrost's submissions end as held calls' paths do: they are told apart first.
  if (method === "POST" && /\/async\/images\/(generations|edits)$/.test(path))
    return "submit:bifrost";
  if (method === "POST" && /\/images\/(generations|edits)\/async$/.test(path))
    return "submit:sub2api";
  if (method === "POST" && /\/images\/generations$/.test(path)) return "generate";
  if (method === "POST" && /\/images\/edits$/.test(path)) return "edit";
  if (method === "POST" && path.startsWith("/r/")) return "respond";
  if (method === "POST" && /\/responses$/.test(path)) return "submit:openai-background";
  if (method === "POST" && /\/cancel$/.test(path)) return "cancel";
  if (method === "GET" && /\/images\/tasks\/[^/]+$/.test(path)) return "poll:sub2api";
  if (method === "GET" && /\/async\/images\/(generations|edits)\/[^/]+$/.test(path))
    return "poll:bifrost";
  if (method === "GET" && /\/responses\/[^/]+$/.test(path)) return "poll:openai-background";
  if (method === "GET" && path.startsWith("/img/")) return "image";
  return `${method} ${path}`;
}

/** The task a call is about: its prompt's `chaos #N`, its job's id, or its image's path. */
export function taskOf(path: string, raw: Buffer): number {
  const found =
    /chaos #(\d+)/.exec(raw.toString("latin1")) ??
    /(?:job|resp)_(\d+)_/.exec(path) ??
    /^\/img\/(\d+)/.exec(path);
  return found ? Number(found[1]) : -1;
}

export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}
