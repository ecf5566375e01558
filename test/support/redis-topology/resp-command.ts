import { connect } from "node:net";

/** Where a Redis (or a sentinel) listens. */
export interface RedisAddress {
  host: string;
  port: number;
}

/** A decoded RESP2 reply; an error reply is an `Error` in an array, thrown at the top. */
export type RespReply = string | number | null | Error | RespReply[];

/** Options of {@link redisCommands}. */
export interface RedisCommandOptions {
  /** Sent as `AUTH` first when set. */
  password?: string;
  /** Deadline of the whole exchange, connect included. Default 2000 ms. */
  timeoutMs?: number;
}

/**
 * Sends `commands` pipelined on a connection of its own and resolves their
 * replies, then closes it. A harness probing nodes that may be dead must not
 * inherit a client library's reconnects, offline queues or error events: this
 * either answers within `timeoutMs` or rejects saying why.
 */
export function redisCommands(
  address: RedisAddress,
  commands: readonly (readonly string[])[],
  options: RedisCommandOptions = {},
): Promise<RespReply[]> {
  const all = options.password === undefined ? commands : [["AUTH", options.password], ...commands];
  const timeoutMs = options.timeoutMs ?? 2_000;
  const where = `${address.host}:${address.port}`;
  return new Promise((resolve, reject) => {
    const socket = connect({ host: address.host, port: address.port });
    let buffer = Buffer.alloc(0);
    const replies: RespReply[] = [];
    const fail = (err: Error) => {
      socket.destroy();
      reject(err);
    };
    const timer = setTimeout(
      () => fail(new Error(`${where}: no answer to ${describe(commands)} in ${timeoutMs} ms`)),
      timeoutMs,
    );
    socket.on("error", (err) => {
      clearTimeout(timer);
      fail(new Error(`${where}: ${err.message}`));
    });
    socket.on("close", () => {
      clearTimeout(timer);
      if (replies.length < all.length) reject(new Error(`${where}: connection closed early`));
    });
    socket.on("connect", () => socket.write(all.map(encodeCommand).join("")));
    socket.on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        let parsed: ReturnType<typeof parseReply>;
        try {
          parsed = parseReply(buffer, 0);
        } catch (err) {
          clearTimeout(timer);
          return fail(new Error(`${where}: ${(err as Error).message}`));
        }
        if (parsed === undefined) return;
        replies.push(parsed.value);
        buffer = buffer.subarray(parsed.next);
        if (replies.length === all.length) break;
      }
      clearTimeout(timer);
      socket.end();
      const answers = options.password === undefined ? replies : replies.slice(1);
      const authError = options.password === undefined ? undefined : replies[0];
      const firstError = [authError, ...answers].find((reply) => reply instanceof Error);
      if (firstError instanceof Error) reject(new Error(`${where}: ${firstError.message}`));
      else resolve(answers);
    });
  });
}

/** One command: {@link redisCommands} with a single command. */
export async function redisCommand(
  address: RedisAddress,
  command: readonly string[],
  options: RedisCommandOptions = {},
): Promise<RespReply> {
  const [reply] = await redisCommands(address, [command], options);
  return reply ?? null;
}

function describe(commands: readonly (readonly string[])[]): string {
  return commands.map((command) => command.slice(0, 2).join(" ")).join(", ");
}

function encodeCommand(args: readonly string[]): string {
  return `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join("")}`;
}

/** Parses one RESP2 reply at `offset`, or answers undefined while it is incomplete. */
function parseReply(
  buffer: Buffer,
  offset: number,
): { value: RespReply; next: number } | undefined {
  const lineEnd = buffer.indexOf("\r\n", offset);
  if (lineEnd < 0) return undefined;
  const type = String.fromCharCode(buffer[offset] ?? 0);
  const line = buffer.toString("utf8", offset + 1, lineEnd);
  const afterLine = lineEnd + 2;
  switch (type) {
    case "+":
      return { value: line, next: afterLine };
    case "-":
      return { value: new Error(line), next: afterLine };
    case ":":
      return { value: Number(line), next: afterLine };
    case "$": {
      const length = Number(line);
      if (length < 0) return { value: null, next: afterLine };
      if (buffer.length < afterLine + length + 2) return undefined;
      return {
        value: buffer.toString("utf8", afterLine, afterLine + length),
        next: afterLine + length + 2,
      };
    }
    case "*": {
      const count = Number(line);
      if (count < 0) return { value: null, next: afterLine };
      const items: RespReply[] = [];
      let next = afterLine;
      for (let i = 0; i < count; i += 1) {
        const item = parseReply(buffer, next);
        if (item === undefined) return undefined;
        items.push(item.value);
        next = item.next;
      }
      return { value: items, next };
    }
    default:
      throw new Error(`unexpected RESP type ${JSON.stringify(type)}`);
  }
}

/** `INFO` text as fields (`role`, `master_link_status`, ...). */
export function parseInfo(text: RespReply): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of String(text).split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0 && !line.startsWith("#")) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}

/** A flat `[field, value, field, value]` reply (SENTINEL MASTERS, REPLICAS...) as an object. */
export function pairsToObject(reply: RespReply): Record<string, string> {
  const fields: Record<string, string> = {};
  if (!Array.isArray(reply)) return fields;
  for (let i = 0; i + 1 < reply.length; i += 2) fields[String(reply[i])] = String(reply[i + 1]);
  return fields;
}
